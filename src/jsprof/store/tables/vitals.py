"""What `fleet vitals` counts of a page load, as rows that add up (the `rollup_vitals` table):
per (route, env, metric, label, bucket) how many values, so that the p75s over any span of
whole days come from one small histogram per release, route, env and day, not from every
upload's timeline.

A page load's values (`load_values`) come from all its chunks' timelines merged
(`timeline.page_loads`: an interaction reported twice counts once, at its longest; the
load's LCP and CLS as its chunks last said them). Its chunks may reach the compactor in
different batches, so a batch adds, per page load it holds, the values of the page load
with its chunks so far (+1 each) and takes away those of the chunks committed before it
(-1 each: `prior_timelines` finds them among that day's uploads of the release). Summed
over every part of a day, that leaves each page load's values once, from all its chunks.

A page load is one per (route, env, UTC day): the unit the rollups keep apart. One whose
chunks fall on two UTC days counts once on each (the per-upload answer over both days
counts it once, its chunks merged); its values per day are those of that day's chunks.

Every value is kept as its bucket of the log scale `rollup.bucket_of` (of the value x
1e6: ms as ns, CLS as millionths), within ALPHA (1 %) of it; `fleet vitals` reads the
bucket middles on every path, so the rollups and the per-upload rows give one answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

# Metrics (the `metric` column) and their labels
LOAD = 0  # one row per page load (value 0)
INP = 1  # the page load's INP (web-vitals' rule: `timeline.inp`)
LCP = 2
CLS = 3
BLOCKING = 4  # each long frame's blockingDuration
LONG_FRAME = 5  # one row per long frame (value 0): the count, with or without blocking
LCP_ELEMENT = 6  # label: the element LCP named (value 0)
DURATION = 7  # per interaction, label: its type
INPUT_DELAY = 8
PROCESSING = 9
PRESENTATION = 10
# per page load, what its client counted and did not send (`timeline.dropped`), label
# "interactions" or "longFrames": one row of value 0 whose count is that number
LEFT_OUT = 11
# (its labels: `timeline.LEFT_OUT_KINDS`, the running pieces not sampled among them)
# A page load's left-out counts are kept at most timeline.LEFT_OUT_MAX (its `left_out`)
LEFT_OUT_MARK = "leftOut"  # a part entry's key: its rows count them (`counts_left_out`)
SCALE = 1e6  # values are bucketed as value x SCALE (ms -> ns)

Row = tuple[int, str, float]  # (metric, label, value)


def load_values(timelines: Iterable[dict | None]) -> list[Row]:
    """The rows of one page load from its chunks' timelines (in upload order), merged."""
    from ...timeline import page_loads

    return page_load_values(page_loads([("", t) for t in timelines])[""])


def page_load_values(pl: Any) -> list[Row]:
    """The rows of one merged page load (`timeline.page_loads`' value)."""
    from ...timeline import inp

    out: list[Row] = [(LOAD, "", 0.0)]
    v = inp([e["duration"] for e in pl.interactions])
    if v is not None:
        out.append((INP, "", v))
    ld = pl.load or {}
    if ld.get("lcp") is not None:
        out.append((LCP, "", ld["lcp"]))
        out.append((LCP_ELEMENT, ld.get("lcpElement") or "(unknown)", 0.0))
    if ld.get("cls") is not None:
        out.append((CLS, "", ld["cls"]))
    for fr in pl.long_frames:
        out.append((LONG_FRAME, "", 0.0))
        if fr.get("blockingDuration") is not None:
            out.append((BLOCKING, "", fr["blockingDuration"]))
    for e in pl.interactions:
        t = e.get("type") or "(unknown)"
        out.append((DURATION, t, e["duration"]))
        ps, pe = e.get("processingStart"), e.get("processingEnd")
        if ps is not None and pe is not None:
            out.append((INPUT_DELAY, t, max(0.0, ps - e["start"])))
            out.append((PROCESSING, t, max(0.0, pe - ps)))
            out.append((PRESENTATION, t, max(0.0, e["start"] + e["duration"] - pe)))
    return out


def counts_left_out(entry: dict) -> dict:
    """A rollup_vitals part entry marked as holding its page loads' LEFT_OUT rows (parts
    written before they were counted do not: `fleet vitals` says which days' counts it
    lacks). A merge keeps the mark when every merged part has it."""
    entry[LEFT_OUT_MARK] = True
    return entry


def left_out(pl: Any) -> list[tuple[str, int]]:
    """One merged page load's left-out counts ((label, n), n > 0): the LEFT_OUT rows,
    each weighted by its n (`signed`)."""
    from ...timeline import left_out as counts

    return [(k, n) for k, n in counts(pl).items() if n]


def signed(cell: Any, pl: Any, sign: int) -> list[tuple[Any, int, str, float, int]]:
    """`tally`'s rows of one merged page load in `cell`: its values, each `sign`, and its
    left-out counts, each `sign` times its count."""
    return ([(cell, m, lab, v, sign) for m, lab, v in page_load_values(pl)]
            + [(cell, LEFT_OUT, k, 0.0, sign * n) for k, n in left_out(pl)])


def buckets(values: Any) -> np.ndarray:
    """Per value: its bucket (`rollup.bucket_of` of value x SCALE)."""
    from .rollup import bucket_of

    v = np.asarray(values, np.float64)
    return bucket_of(np.rint(np.clip(v * SCALE, 0.0, 9e18)).astype(np.int64))


def tally(rows: Iterable[tuple[Any, int, str, float, int]]) -> dict[str, list]:
    """(cell, metric, label, value, count) rows -> rollup_vitals columns: counts summed per
    (cell, metric, label, bucket), rows that sum to 0 left out. `cell`: (route, env);
    count: +1/-1 a value, +/-n a LEFT_OUT row (`signed`)."""
    rows = list(rows)
    b = buckets([r[3] for r in rows]).tolist() if rows else []
    acc: dict[tuple, int] = {}
    for (cell, m, lab, _, sign), bk in zip(rows, b, strict=True):
        k = (cell[0], cell[1], m, lab, bk)
        acc[k] = acc.get(k, 0) + sign
    keys = sorted((k for k, n in acc.items() if n), key=lambda k: (
        k[0] or "", k[0] is None, k[1] or "", k[1] is None, k[2], k[3], k[4]))
    return {"route": [k[0] for k in keys], "env": [k[1] for k in keys],
            "metric": np.asarray([k[2] for k in keys], np.int8),
            "label": [k[3] for k in keys],
            "bucket": np.asarray([k[4] for k in keys], np.int16),
            "count": np.asarray([acc[k] for k in keys], np.int64)}


Prior = Callable[[set[tuple]], dict[tuple, list[dict | None]]]


def batch_rows(up: dict[str, list], prior: Prior | None) -> dict[str, list]:
    """The rollup_vitals columns a batch of one release and day adds: `up` per upload (in
    upload-key order) `route`, `env`, `page_load`, `timeline`; `prior`: for (route, env,
    page_load) keys, the timelines of their chunks already committed that day (None:
    there are none, as when a whole day is rolled up at once)."""
    loads: dict[tuple, list[dict | None]] = {}
    for i, (r, e, p, t) in enumerate(zip(up["route"], up["env"], up["page_load"],
                                         up["timeline"], strict=True)):
        loads.setdefault((r, e, p) if p is not None else (r, e, None, i), []).append(t)
    before = prior({k for k in loads if len(k) == 3}) if prior is not None else {}
    from ...timeline import page_loads

    def merged(ts: list[dict | None]) -> Any:
        return page_loads([("", t) for t in ts])[""]

    rows = []
    for k, ts in loads.items():
        old = before.get(k) if len(k) == 3 else None
        rows += signed((k[0], k[1]), merged([*(old or []), *ts]), 1)
        if old:
            rows += signed((k[0], k[1]), merged(old), -1)
    return tally(rows)


# Per (tables, release, day): per uploads part of that day, its uploads' keys and
# page-load ids (Arrow strings) and each row group's range of upload keys. A process
# (the compactor, a collector's worker) reads each part's two columns once (a merged
# part's again: a merge's parts leave the index as it comes); ~20-30 bytes an upload
# (~45 MB for a day at 20 uploads/s); at most _INDEX_MAX (release, day)s, the least
# recently used going first.
_index: dict[tuple, dict] = {}
_INDEX_MAX = 8


def _day_index(tdir: Any, man: dict, rkey: str, day: str | None) -> dict:
    """The index of `rkey`'s `day` (`_index`): part path -> (uk, page_load, (row group,
    min uk, max uk)), brought up to `man` (its uploads parts, checked)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .parts import read_part, verify_part

    key = (str(tdir), rkey, day)
    ix = _index.pop(key, None) or {}
    while len(_index) >= _INDEX_MAX:
        del _index[next(iter(_index))]
    _index[key] = ix
    paths = []
    for e in man["uploads"]:
        if not isinstance(e, dict) or e.get("rkey") != rkey or e.get("day") != day:
            continue
        path = verify_part(tdir, e)
        paths.append(path)
        if path in ix:
            continue
        t = read_part(pq, path, tdir, ["uk", "page_load"])
        u = t["uk"].to_numpy()
        # each row group's range of upload keys: where a lookup's uploads are
        n = np.asarray([m.num_rows for m in _row_groups(path)], np.int64)
        starts = (np.cumsum(n) - n)[n > 0]
        groups = (np.nonzero(n > 0)[0], np.minimum.reduceat(u, starts),
                  np.maximum.reduceat(u, starts)) if len(u) else (np.zeros(0, np.int64),) * 3
        on = pc.is_valid(t["page_load"])
        ix[path] = (u[on.to_numpy(zero_copy_only=False)],
                    t["page_load"].filter(on).combine_chunks(), groups)
    for gone in set(ix) - set(paths):  # merged away: the merged part holds its rows
        del ix[gone]
    return ix


def _row_groups(path: str) -> list:
    import pyarrow.parquet as pq

    md = pq.ParquetFile(path).metadata
    return [md.row_group(i) for i in range(md.num_row_groups)]


def _prior_rows(tdir: Any, man: dict, rkey: str, day: str | None, want: set[tuple],
                cols: list[str]) -> list[tuple[int, tuple, dict]]:
    """The committed uploads of `rkey` and `day` (as `man` lists them) of the page loads
    `want` ((route, env, page_load) keys): per upload (uk, its key, its `cols`), read from
    the day's index (`_day_index`), then only the row groups that hold them (a batch's
    part is one row group, a merge's row groups hold at most 16 MB: a live page load's
    earlier chunks are in a few recent ones), found by their upload keys' range."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .manifest import CompactError

    if not want:
        return []
    ix = _day_index(tdir, man, rkey, day)
    ids = pa.array(sorted({k[2] for k in want}), pa.string())
    out: list[tuple[int, tuple, dict]] = []
    for path, (in_part, loads, (gi, lo, hi)) in ix.items():
        hit = pc.is_in(loads, value_set=ids).to_numpy(zero_copy_only=False)
        if not hit.any():
            continue
        uks = np.sort(in_part[hit])
        j = np.minimum(np.searchsorted(uks, lo), len(uks) - 1)
        groups = gi[(uks[j] >= lo) & (uks[j] <= hi)].tolist()
        if not groups:
            continue
        try:
            t = pq.ParquetFile(path).read_row_groups(
                groups, columns=["uk", "route", "env", "page_load", *cols],
                use_threads=False).to_pydict()
        except (OSError, pa.ArrowException) as x:
            msg = (str(x).splitlines() or ["unreadable"])[0][:200]
            raise CompactError(f"{path}: table part does not read ({msg}); remove "
                               f"{tdir} to rebuild the tables from the raw uploads"
                               ) from None
        for i, (uk, r, en, p) in enumerate(zip(t["uk"], t["route"], t["env"],
                                               t["page_load"], strict=True)):
            if (r, en, p) in want:
                out.append((uk, (r, en, p), {c: t[c][i] for c in cols}))
    return out


def prior_uploads(tdir: Any, man: dict, rkey: str, day: str | None, want: set[tuple]
                  ) -> dict[tuple, list[int]]:
    """Per (route, env, page_load) key of `want`: the upload keys of its chunks committed
    before (`_prior_rows`), in order."""
    out: dict[tuple, list[int]] = {}
    for uk, k, _ in sorted(_prior_rows(tdir, man, rkey, day, want, []), key=lambda x: x[0]):
        out.setdefault(k, []).append(uk)
    return out


def prior_timelines(tdir: Any, man: dict, rkey: str, day: str | None) -> Prior:
    """`batch_rows`' `prior` from the committed uploads of `rkey` and `day` as `man` lists
    them: the timelines (in `meta`) of the wanted page loads' earlier chunks
    (`_prior_rows`)."""
    def get(want: set[tuple]) -> dict[tuple, list[dict | None]]:
        import orjson

        out: dict[tuple, list[tuple[int, dict | None]]] = {}
        for uk, k, c in _prior_rows(tdir, man, rkey, day, want, ["meta"]):
            tl = orjson.loads(c["meta"]).get("timeline") if c["meta"] else None
            out.setdefault(k, []).append((uk, tl if isinstance(tl, dict) else None))
        return {k: [t for _, t in sorted(v, key=lambda x: x[0])] for k, v in out.items()}

    return get
