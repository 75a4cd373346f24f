"""The Time view of a fleet merge: when in a page load each function runs, over many.

Page loads share no clock, but each has its own: the time since its navigation start (its
`timeOrigin`, which the browser's sample times and timeline entries count from). So the
merged Time view places every sample at its time since its page's start and sums them per
time bucket over the matching page loads: per function, its self time in each bucket and
its share of that bucket's sampled time; beside them, when long animation frames,
interactions and LCP happened (from the timelines the uploads carry) and the `fleet
vitals` rows of the same selection, and links to example uploads, whose own Time view
has real sample times.

The samples table keeps each sample's time on its upload's clock (written at compaction,
issue 34), and the uploads table the timelines, so this reads only tables: the samples of
at most TIME_UPLOADS uploads (an even spread over the selection, said on the page), to
bound the page's size and the work. Within that cap each function's time summed over the
buckets is its `fleet top` self time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..analysis.profile import FunctionKey
from ..trace import NONE, no_stack_name
from . import timeline as tl
from .engine import Snapshot, Uploads

TIME_UPLOADS = 500  # uploads whose samples a view reads at most
BUCKETS = 100  # time buckets up to the 99th percentile of sample times (and one "later")
FUNCTIONS = 200  # functions with a per-bucket row; the rest are one "(other functions)" row
EXAMPLES = 6  # example uploads linked
NS_PER_MS = 1_000_000


def _nice(x: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `x` (ms)."""
    if not x > 0:
        return 1.0
    p = 10.0 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * p >= x - 1e-12:
            return m * p
    return 10 * p


def _spread(n: int, cap: int) -> np.ndarray:
    """Indices of at most `cap` of n items, evenly spread (all of them under the cap)."""
    if n <= cap:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, cap).round().astype(np.int64))


def time_course(engine: Any, snap: Snapshot, sel: Any, app: str) -> dict:
    """The `fleetTime` block of the viewer's model for a query's Selection `sel`."""
    from .engine import sample_rows
    from .query import idle_mask
    from .release import identity, mapped_release, named_release, stored_trace
    from .vitals import upload_rows, vitals

    up: Uploads = sel.uploads
    pick = _spread(len(up), TIME_UPLOADS)
    chosen = np.zeros(len(up), bool)
    chosen[pick] = True
    sub = up.subset(chosen)
    # Each picked upload's samples (the samples table) and timeline (the uploads table's
    # meta): no raw upload is read.
    rows = sample_rows(snap, sub)
    metas = upload_rows(snap, sel.filters, sub)
    starts = {}
    if len(rows["uk"]):
        change = np.flatnonzero(np.diff(rows["uk"])) + 1
        for a, b in zip(np.r_[0, change].tolist(), np.r_[change, len(rows["uk"])].tolist(),
                        strict=True):
            starts[int(rows["uk"][a])] = (a, b)
    parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    timelines: list[tuple[str, dict | None]] = []
    with_timeline: set[int] = set()
    # Uploads compacted before the tables kept sample times (format 4) have none here.
    untimed = int((sub.uk < snap.manifest.get("samplesFromUk", 0)).sum())
    for i in pick.tolist():
        uk = int(up.uk[i])
        meta = metas.get(uk, (None, {}))[1]
        timelines.append((up.page_load[i] or f"upload:{up.id[i]}", meta.get("timeline")))
        if meta.get("timeline"):
            with_timeline.add(i)
        if uk not in starts:
            continue  # no samples
        a, b = starts[uk]
        tt = rows["t"][a:b]
        w = rows["weight_ns"][a:b] / NS_PER_MS
        st = rows["stack_id"][a:b]
        mk = rows["marker"][a:b].astype(np.int64)
        if sel.filters.exclude_idle:
            # as the other merged views: (idle) and (program) samples left out
            keep = ~idle_mask(st, mk)
            tt, w, st, mk = tt[keep], w[keep], st[keep], mk[keep]
        parts.append((i, tt, w, st, mk))
    read = len(pick) - untimed
    # Each stored frame's function as `fleet top` names it (after the release's maps).
    rel_names = dict(zip(up.rkey, up.release, strict=True))
    keys: dict[FunctionKey | str, int] = {}
    times, weights, fn, load_of = [], [], [], []
    loads = up.page_load_index()
    leaf: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    ident = identity(sel.filters)  # as the merged views name scripts
    for rkey in sorted({up.rkey[i] for i, *_ in parts}):
        trace = stored_trace(snap, rkey)
        rel = named_release(mapped_release(snap, rkey, app, rel_names[rkey], trace), ident)
        fid = np.asarray([keys.setdefault(k, len(keys)) for k in rel.frame_key] or [0], np.int64)
        leaf[rkey] = (trace.stack_frame.astype(np.int64), fid)
    for i, tt, w, st, mk in parts:
        frames, fid = leaf[up.rkey[i]]
        g = np.empty(len(st), np.int64)
        js = st != NONE
        g[js] = fid[frames[st[js]]]
        for code in np.unique(mk[~js]).tolist():
            # Samples without a stack are named as `report` and `fleet top` name them.
            g[~js & (mk == code)] = keys.setdefault(no_stack_name(int(code)), len(keys))
        times.append(tt)
        weights.append(w)
        fn.append(g)
        load_of.append(np.full(len(tt), loads[i], np.int64))
    t = np.concatenate(times) if times else np.zeros(0)
    w = np.concatenate(weights) if weights else np.zeros(0)
    g = np.concatenate(fn) if fn else np.zeros(0, np.int64)
    lo = np.concatenate(load_of) if load_of else np.zeros(0, np.int64)
    t = np.maximum(t, 0.0)  # a sample before navigation start (none should be) counts at 0
    # Buckets up to the 99th percentile of the samples' times, so one tab left open for an
    # hour does not squeeze every page load into the first bucket; later samples are one
    # last bucket ("later").
    hi = float(np.percentile(t, 99)) if len(t) else 1.0
    width = _nice(max(hi, 1.0) / BUCKETS)
    nb = max(int(math.ceil(hi / width)), 1)
    b = np.minimum((t // width).astype(np.int64), nb)
    later = bool((b == nb).any())
    nbk = nb + 1 if later else nb
    b = np.minimum(b, nbk - 1)
    total_b = np.bincount(b, weights=w, minlength=nbk)
    # Page loads with a sample in each bucket: what the bucket's time is spread over.
    stride = int(lo.max()) + 1 if len(lo) else 1
    loads_b = np.bincount(np.unique(b * stride + lo) // stride, minlength=nbk)
    names = [None] * len(keys)
    for k, v in keys.items():
        names[v] = k
    self_ms = np.bincount(g, weights=w, minlength=len(keys))
    order = np.argsort(-self_ms, kind="stable")
    order = order[self_ms[order] > 0]
    rows = []
    for j in order[:FUNCTIONS].tolist():
        m = g == j
        per = np.bincount(b[m], weights=w[m], minlength=nbk)
        nz = np.nonzero(per)[0]
        k = names[j]
        rows.append({
            "name": k.label() if isinstance(k, FunctionKey) else k,
            "loc": k.location() if isinstance(k, FunctionKey) else "",
            "self": round(float(self_ms[j]), 6),
            "b": nz.tolist(), "v": [round(float(x), 6) for x in per[nz]],
        })
    rest = order[FUNCTIONS:]
    if len(rest):
        m = np.isin(g, rest)
        per = np.bincount(b[m], weights=w[m], minlength=nbk)
        nz = np.nonzero(per)[0]
        rows.append({"name": f"(other functions: {len(rest)})", "loc": "",
                     "self": round(float(per.sum()), 6), "other": True,
                     "b": nz.tolist(), "v": [round(float(x), 6) for x in per[nz]]})
    # The page's own reports, on the same buckets: when long frames and interactions
    # started, and when LCP came.
    pls = tl.page_loads(timelines)

    def bucket(ms: float) -> int:
        return min(int(max(ms, 0.0) // width), nbk - 1)

    lf_n = [0] * nbk
    lf_block = [0.0] * nbk
    in_n = [0] * nbk
    in_slow = [0.0] * nbk  # the slowest interaction starting in each bucket
    lcp_n = [0] * nbk
    for pl in pls.values():
        for f in pl.long_frames:
            k = bucket(f["start"])
            lf_n[k] += 1
            lf_block[k] += float(f.get("blockingDuration") or 0.0)
        for e in pl.interactions:
            k = bucket(e["start"])
            in_n[k] += 1
            in_slow[k] = max(in_slow[k], float(e["duration"]))
        if pl.load and pl.load.get("lcp") is not None:
            lcp_n[bucket(pl.load["lcp"])] += 1
    return {
        "width": width, "buckets": nbk, "later": later,
        "uploads": read, "uploadsAll": len(up), "uploadsUntimed": untimed,
        "pageLoads": len(pls),
        "pageLoadsAll": up.page_loads(),
        "totalMs": round(float(w.sum()), 6),
        "bucketMs": [round(float(x), 6) for x in total_b],
        "bucketLoads": loads_b.tolist(),
        "fns": rows,
        "longFrames": {"n": lf_n, "blocking": [round(x, 3) for x in lf_block]},
        "interactions": {"n": in_n, "slowest": [round(x, 3) for x in in_slow]},
        "lcp": lcp_n,
        "vitals": vitals(engine, snap, sel.filters)["rows"],
        "examples": _examples(up, pls, pick, with_timeline),
    }


def _examples(up: Uploads, pls: dict[str, tl.PageLoad], pick: np.ndarray,
              with_timeline: set[int]) -> list[dict]:
    """A few uploads worth opening on their own: the slowest interaction's, the most
    blocking long frames', the most sampled time's, the median page load's. Of a page load
    in chunks, the chunk that carries the timeline (its Time view shows the windows)."""
    from .vitals import inp

    out: list[dict] = []
    seen: set[str] = set()

    def add(i: int, why: str) -> None:
        if up.id[i] not in seen and len(out) < EXAMPLES:
            seen.add(up.id[i])
            out.append({"id": up.id[i], "why": why, "release": up.release[i]})

    idx = pick.tolist()
    key = {i: up.page_load[i] or f"upload:{up.id[i]}" for i in idx}
    by_inp = [(inp([e["duration"] for e in pls[key[i]].interactions]), i in with_timeline, i)
              for i in idx
              if key[i] in pls and pls[key[i]].interactions]
    if by_inp:
        v, _, i = max(by_inp)
        add(i, f"slowest INP of the selection: {v:.0f} ms")
    by_block = [(sum(float(f.get("blockingDuration") or 0.0) for f in pls[key[i]].long_frames),
                 i in with_timeline, i)
                for i in idx if key[i] in pls and pls[key[i]].long_frames]
    if by_block:
        v, _, i = max(by_block)
        add(i, f"most long-frame blocking: {v:.0f} ms")
    if idx:
        by_ms = sorted(idx, key=lambda i: (float(up.total_ms[i]), up.id[i]))
        add(by_ms[-1], f"most sampled time: {float(up.total_ms[by_ms[-1]]):.0f} ms")
        mid = by_ms[len(by_ms) // 2]
        add(mid, f"median sampled time: {float(up.total_ms[mid]):.0f} ms")
    return out


class StoreSources:
    """The source view's reader for a fleet merge: the store keeps no scripts, so the only
    text is what the releases' source maps carry (`sourcesContent`), by source URL."""

    missing = "nomap"  # the source view's word for a function without text
    no_lines = ("The uploads of a fleet merge have no per-line data: the browser's Profiler "
                "records each function's position, not the line that ran (`jsprof report "
                "--by line` says the same of these traces), so time is per function here.")

    def __init__(self, releases: dict, ident: Any = None) -> None:
        self.texts: dict[str, str] = {}
        for rel in releases.values():
            for sm in (getattr(rel, "maps", None) or {}).values():
                for s, content in enumerate(sm.contents):
                    if content is not None:
                        self.texts.setdefault(sm.source_url(s), content)
        # by the names the merged views give the sources too (`fleet.releases`' rule)
        if ident is not None:
            for url, content in list(self.texts.items()):
                self.texts.setdefault(ident(url) or url, content)

    def __call__(self, url: str) -> str | None:
        return self.texts.get(url)
