"""What `fleet regressions` reads of a function's self time per page load, as rows that add up
(format 10): per (route, env, function) the page loads' sum and sum of squares of its self
ns per page load (`rollup_perload`), and the uploads with the most of it
(`rollup_examples`), so that a release's or a day's test reads rows per function and day,
not per upload.

A function is keyed by a 63-bit hash of its name, its script as the default identity
rule names it, its line and column (`function_hash`: `rollup.group_key`; format 12, where
10 and 11 hashed name and script, any line), the same in every
batch, in a query's tail and in every release, so a page load whose chunks are in
different batches (or some committed and some in the tail, whose frame ids differ) adds
up on one key. A sample with no stack is keyed -2 - its marker (as `rollup_moments`), and
the page load itself LOAD_KEY: `loads` counts it, `s_sum` and `s_sq` are of its all ns.

A page load's value is its chunks summed. Its chunks may reach the compactor in different
batches, so a batch adds, per page load it holds, x_new = x_old + x (x: this batch's
chunks, x_old: the chunks committed before, which `prior_self` reads back from that day's
upload_frames): to the sum x, to the sum of squares x_new^2 - x_old^2 = x (2 x_old + x),
to `loads` 1 only when there was no earlier chunk. Summed over every part of a day, that
leaves each page load's x once, and x^2 once. As in rollup_vitals a page load is one per
(route, env, UTC day).

`rollup_examples` keeps, per (route, env, function), the EXAMPLES_KEPT uploads with the
most self ns in it (ties: the newest, the larger upload key, first): the top k of a union
is the top k of the parts' top k, so a merge keeps k and a query over any days reads k
per day.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .rollup import top_examples, unique_rows

LOAD_KEY = -1000  # the page load itself (the no-stack keys are -1 .. -17)

PriorSelf = Callable[[set[tuple]], dict[tuple, tuple[np.ndarray, np.ndarray]]]


def function_hash(name: str, resource: str | None, line: int | None,
                  column: int | None) -> int:
    """A frame's function (`rollup.group_key`: name, script by the default identity rule,
    line, column) as a 63-bit integer (>= 0). By place (format 12): a minified script's
    functions that share a name (or none) are each their own key, so a query that keys
    them by place reads each apart, and one that keys them by name sums the one place a
    release has of it (issue 32)."""
    from ...analysis.diff import script_identity

    s = (f"{name}\0{script_identity(resource) or ''}\0{resource is None}"
         f"\0{'' if line is None else line}\0{'' if column is None else column}")
    h = int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")
    return h & ((1 << 63) - 1)


def frame_hashes(frames: list[tuple]) -> np.ndarray:
    """Per frame (name, resource, line, column), in id order: its `function_hash`."""
    return np.asarray([function_hash(*f[:4]) for f in frames] or [], np.int64)


def upload_keys(uk: np.ndarray, frame_id: np.ndarray, marker: np.ndarray, self_ns: np.ndarray,
                hashes: np.ndarray, frame_base: int = 0) -> dict[str, np.ndarray]:
    """upload_frames rows -> self ns per (upload, key), none 0; and per upload its all ns
    (every sample is some frame's self or a no-stack row's) as key LOAD_KEY. `hashes`:
    per frame id - `frame_base`, its key."""
    uk = np.asarray(uk, np.int64)
    fid = np.asarray(frame_id, np.int64)
    ns = np.asarray(self_ns, np.int64)
    js = fid >= 0
    key = np.where(js, 0, -2 - np.asarray(marker, np.int64))
    if js.any():
        key[js] = np.asarray(hashes, np.int64)[fid[js] - frame_base]
    on = ns != 0
    k = np.concatenate([np.stack([uk[on], key[on]], axis=1),
                        np.stack([uk, np.full(len(uk), LOAD_KEY, np.int64)], axis=1)])
    v = np.concatenate([ns[on], ns])
    if not len(k):
        z = np.zeros(0, np.int64)
        return {"uk": z, "key": z.copy(), "s": z.copy()}
    uq, inv = unique_rows(k)
    s = np.zeros(len(uq), np.int64)
    np.add.at(s, inv.reshape(-1), v)  # integers: exact
    return {"uk": uq[:, 0].copy(), "key": uq[:, 1].copy(), "s": s}


def batch_rows(up: dict[str, list], per: dict[str, np.ndarray], prior: PriorSelf | None
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rollup_perload and rollup_examples columns a batch of one release and day adds.
    `up` per upload `uk`, `id`, `route`, `env`, `page_load`; `per`: `upload_keys` of
    them; `prior`: for (route, env, page_load) keys, the self ns per key of their chunks
    committed before that day (None: there are none, a whole day rolled up at once)."""
    uks = np.asarray(up["uk"], np.int64)
    order = np.argsort(uks, kind="stable")
    suk = uks[order]
    loads: dict[tuple, int] = {}
    load_of = np.asarray([loads.setdefault((r, e, p) if p is not None else (r, e, None, i),
                                           len(loads))
                          for i, (r, e, p) in enumerate(zip(up["route"], up["env"],
                                                            up["page_load"], strict=True))],
                         np.int64)
    lkeys = list(loads)
    puk = np.asarray(per["uk"], np.int64)
    i = np.minimum(np.searchsorted(suk, puk), max(len(suk) - 1, 0))
    ok = suk[i] == puk if len(suk) else np.zeros(len(puk), bool)
    row = order[i[ok]]  # each (upload, key) row's upload
    pkey = np.asarray(per["key"], np.int64)[ok]
    ps = np.asarray(per["s"], np.int64)[ok]
    # x per (page load, key) of this batch's chunks
    k = np.stack([load_of[row], pkey], axis=1) if len(row) else np.zeros((0, 2), np.int64)
    # every page load has its LOAD_KEY row, one of uploads with no sample too
    kx = np.concatenate([k, np.stack([np.arange(len(lkeys), dtype=np.int64),
                                      np.full(len(lkeys), LOAD_KEY, np.int64)], axis=1)])
    vx = np.concatenate([ps, np.zeros(len(lkeys), np.int64)])
    uq, inv = unique_rows(kx)
    x = np.zeros(len(uq), np.int64)
    np.add.at(x, inv.reshape(-1), vx)
    old = np.zeros(len(uq), np.int64)
    new_load = np.ones(len(lkeys), bool)
    before = prior({kk for kk in lkeys if len(kk) == 3}) if prior is not None else {}
    extra_l, extra_k, extra_v = [], [], []
    for li, kk in enumerate(lkeys):
        got = before.get(kk) if len(kk) == 3 else None
        if got is None:
            continue
        new_load[li] = False
        extra_l.append(np.full(len(got[0]), li, np.int64))
        extra_k.append(np.asarray(got[0], np.int64))
        extra_v.append(np.asarray(got[1], np.int64))
    if extra_l:
        # the earlier chunks' keys: x_old beside this batch's x (0 where it has none)
        ok_ = np.stack([np.concatenate(extra_l), np.concatenate(extra_k)], axis=1)
        ov = np.concatenate(extra_v)
        both = np.concatenate([uq, ok_]) if len(uq) else ok_
        uq2, inv2 = unique_rows(both)
        inv2 = inv2.reshape(-1)
        x2 = np.zeros(len(uq2), np.int64)
        x2[inv2[:len(uq)]] = x
        o2 = np.zeros(len(uq2), np.int64)
        np.add.at(o2, inv2[len(uq):], ov)
        uq, x, old = uq2, x2, o2
    xf, of = x.astype(np.float64), old.astype(np.float64)
    li = uq[:, 0]
    # per (cell, key): sum x, sum x (2 x_old + x), loads new (LOAD_KEY rows only)
    cells: dict[tuple, int] = {}
    cell_of_load = np.asarray([cells.setdefault(kk[:2], len(cells)) for kk in lkeys] or [0],
                              np.int64)
    names = list(cells)
    ck = np.stack([cell_of_load[li], uq[:, 1]], axis=1) if len(uq) else np.zeros((0, 2),
                                                                                   np.int64)
    cq, cinv = unique_rows(ck)
    cinv = cinv.reshape(-1)
    s_sum = np.zeros(len(cq), np.int64)
    np.add.at(s_sum, cinv, x)
    s_sq = np.bincount(cinv, weights=xf * (2.0 * of + xf), minlength=len(cq))
    is_load = uq[:, 1] == LOAD_KEY
    n_loads = np.bincount(cinv[is_load], weights=new_load[li[is_load]].astype(np.float64),
                          minlength=len(cq)).astype(np.int64)
    keep = (s_sum != 0) | (s_sq != 0) | (n_loads != 0)
    cq, s_sum, s_sq, n_loads = cq[keep], s_sum[keep], s_sq[keep], n_loads[keep]
    perload = {"route": [names[c][0] for c in cq[:, 0].tolist()],
               "env": [names[c][1] for c in cq[:, 0].tolist()],
               "key": cq[:, 1].copy(), "loads": n_loads, "s_sum": s_sum,
               "s_sq": s_sq.astype(np.float64)}
    # examples: per (cell, key) the uploads with the most self ns, this batch's
    cell_up = cell_of_load[load_of] if len(load_of) else load_of
    fn = pkey != LOAD_KEY
    ex = {"cell": cell_up[row[fn]], "key": pkey[fn], "uk": uks[row[fn]], "self_ns": ps[fn],
          "row": row[fn]}
    top = top_examples(ex["cell"], ex["key"], ex["self_ns"], ex["uk"])
    examples = {"route": [names[c][0] for c in ex["cell"][top].tolist()],
                "env": [names[c][1] for c in ex["cell"][top].tolist()],
                "key": ex["key"][top].copy(), "uk": ex["uk"][top].copy(),
                "id": [up["id"][r] for r in ex["row"][top].tolist()],
                "self_ns": ex["self_ns"][top].copy()}
    return perload, examples


def prior_self(tdir: Any, man: dict, rkey: str, day: str | None) -> PriorSelf:
    """`batch_rows`' `prior` from the committed uploads of `rkey` and `day` as `man` lists
    them: the wanted page loads' earlier uploads (`vitals.prior_uploads`), their
    upload_frames rows (the day's parts, the row groups of their upload keys), each frame
    by its function's key (the release's committed frames)."""
    def get(want: set[tuple]) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from .parts import read_part, verify_part
        from .vitals import prior_uploads

        if not want:
            return {}
        found = prior_uploads(tdir, man, rkey, day, want)
        if not found:
            return {}
        load_of = {uk: kk for kk, uks in found.items() for uk in uks}
        uks = pa.array(sorted(load_of), pa.int64())
        entry = man["releases"][rkey]
        rows = []
        for e in entry["parts"]["upload_frames"]:
            if not isinstance(e, dict) or e.get("day") != day:
                continue
            path = verify_part(tdir, e)
            t = pq.read_table(path, columns=["uk", "frame_id", "marker", "self_ns"],
                              filters=[("uk", "in", uks)])
            if t.num_rows:
                rows.append(t)
        z = np.zeros(0, np.int64)
        out: dict[tuple, tuple[np.ndarray, np.ndarray]] = dict.fromkeys(found, (z, z))
        if not rows:
            return out  # earlier chunks without a sample: the page load is not new
        t = pa.concat_tables(rows)
        frames: list[tuple] = []
        for e in entry["parts"]["frames"]:  # in id order
            f = read_part(pq, verify_part(tdir, e), tdir,
                          ["name", "resource", "line", "column"]).to_pydict()
            frames += zip(f["name"], f["resource"], f["line"], f["column"], strict=True)
        per = upload_keys(t["uk"].to_numpy(), t["frame_id"].to_numpy(),
                          t["marker"].to_numpy(), t["self_ns"].to_numpy(),
                          frame_hashes(frames))
        acc: dict[tuple, dict[int, int]] = {}
        for uk, k, s in zip(per["uk"].tolist(), per["key"].tolist(), per["s"].tolist(),
                            strict=True):
            d = acc.setdefault(load_of[uk], {})
            d[k] = d.get(k, 0) + s
        for kk, d in acc.items():
            out[kk] = (np.fromiter(d.keys(), np.int64, len(d)),
                       np.fromiter(d.values(), np.int64, len(d)))
        return out

    return get
