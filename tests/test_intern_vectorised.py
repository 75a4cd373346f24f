"""Interning without per-stack Python work (issue 34): the same tables as before.

A collector worker's query interns the uploads stored since its last one; that cost
~16-18 ms of CPU per field upload, most of it a per-stack Python loop mapping each trace
stack to the release's (`_map_stacks`), the walk up each sampled stack for the frames
present, and `np.unique(..., axis=0)`'s sort of rows as byte records in the rollups. Those
are now a single pass over plain lists, vectorised steps over the trace's own stack table,
and integer sorts or dense sums (`intern.map_stacks`, `intern.on_path`,
`rollup.unique_rows`, `rollup._moments_block`). Here the interning as it was (kept below,
verbatim but for names) and the new one read the same uploads (field traces with
repeated frames, so distinct trace stacks meet in one release stack; idle samples with
markers; busy samples attributed to long frames) into tables that must be equal, row for
row and id for id."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleet_util import T0, make_trace, upload
from jsprof.store import Store
from jsprof.store.tables import intern, perload, rollup
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.view import read_tail
from jsprof.trace import NONE

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from bench_ingest import field_trace  # noqa: E402

# ---- the interning before issue 34's rework (the reference) ---------------------------------

def _old_add_upload(rel: Any, uk: int, rec: Any, meta: dict, lines: Any = None
                    ) -> tuple[int, float, float]:
    keys, samples, wns = [], [], []
    times, stacks, markers = [], [], []
    lost_ms = 0.0
    for track in rec.tracks:
        tr = track.trace
        if tr.num_samples == 0:
            continue
        w, lost = intern.upload_weights(track, meta)
        lost_ms += lost
        tr = intern.attributed(track, meta, w, lines)
        res = tr.resources
        fmap = [rel.frame((f.name, None if f.resource_id is None else res[f.resource_id],
                           f.line, f.column)) for f in tr.frames]
        smap = _old_map_stacks(rel, tr.stack_parent, tr.stack_frame, fmap)
        st = smap[tr.sample_stack]
        mk = (tr.sample_marker.astype(np.int64) if tr.sample_marker is not None
              else np.full(tr.num_samples, NONE, np.int64))
        keys.append((st + 1) * 16 + (mk + 1))
        samples.append(np.ones(tr.num_samples, np.int64))
        wns.append(np.rint(w * intern.NS_PER_MS).astype(np.int64))
        times.append(tr.sample_time)
        stacks.append(st)
        markers.append(mk)
    if not keys:
        return 0, 0.0, 0.0
    rel.samples.append(
        {"uk": uk, "t": np.concatenate(times), "stack_id": np.concatenate(stacks),
         "marker": np.concatenate(markers).astype(np.int8), "weight_ns": np.concatenate(wns),
         "_at": rel.cur_at})
    k, n, ns = _old_segment_sums(np.concatenate(keys), np.concatenate(samples),
                                 np.concatenate(wns))
    stack = k // 16 - 1
    marker = k % 16 - 1
    rel.weights.append({"uk": uk, "stack_id": stack, "marker": marker, "samples": n,
                        "weight_ns": ns, "_at": rel.cur_at})
    sp = rel.stack_parent
    sf = rel.stack_frame
    present: set[int] = set()
    seen: set[int] = set()
    for s in stack[stack >= 0].tolist():
        while s != NONE and s not in seen:
            seen.add(s)
            present.add(sf[s])
            s = sp[s]
    js = stack >= 0
    leaf = np.asarray(sf, np.int64)[stack[js]] if js.any() else np.zeros(0, np.int64)
    fk, fn, fns = _old_segment_sums(leaf, n[js], ns[js])
    self_n = dict(zip(fk.tolist(), fn.tolist(), strict=True))
    self_ns = dict(zip(fk.tolist(), fns.tolist(), strict=True))
    fids = sorted(present)
    ik, in_, ins = _old_segment_sums(marker[~js], n[~js], ns[~js])
    rel.upload_frames.append({
        "uk": uk,
        "frame_id": np.asarray(fids + [NONE] * len(ik), np.int64),
        "marker": np.asarray([NONE] * len(fids) + ik.tolist(), np.int64),
        "self_samples": np.asarray([self_n.get(f, 0) for f in fids] + in_.tolist(), np.int64),
        "self_ns": np.asarray([self_ns.get(f, 0) for f in fids] + ins.tolist(), np.int64),
        "_at": rel.cur_at})
    return int(n.sum()), float(ns.sum()) / intern.NS_PER_MS, lost_ms


def _old_map_stacks(rel: Any, parent: np.ndarray, frame: np.ndarray, fmap: list[int]
                    ) -> np.ndarray:
    n = len(parent)
    out = np.full(n + 1, NONE, np.int64)
    par = parent.tolist()
    fr = frame.tolist()
    for s in range(n):
        if out[s] != NONE:
            continue
        chain = []
        cur = s
        while cur != NONE and out[cur] == NONE and len(chain) <= n:
            chain.append(cur)
            cur = par[cur]
        up = NONE if cur == NONE else int(out[cur])
        for c in reversed(chain):
            up = rel.stack(up, fmap[fr[c]])
            out[c] = up
    return out


def _old_segment_sums(keys: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.zeros(0, np.int64)
    out = [k[starts]]
    for v in values:
        out.append(np.add.reduceat(v[order], starts) if len(k) else v[:0])
    return tuple(out)


def _old_moments_block(uk: np.ndarray, st: np.ndarray, mk: np.ndarray, w: np.ndarray,
                       js: np.ndarray, sidx: np.ndarray, pair: np.ndarray, cnt: np.ndarray,
                       start: np.ndarray, leaf: np.ndarray) -> dict[str, np.ndarray]:
    ku, kk = [uk[~js]], [-2 - mk[~js]]
    s_l, t_l = [w[~js]], [w[~js]]
    if js.any():
        inv = sidx[js]
        n_of = cnt[inv]
        row = np.repeat(np.arange(len(inv)), n_of)
        off = np.arange(len(row)) - np.repeat(np.cumsum(n_of) - n_of, n_of)
        ujs, wjs = uk[js], w[js]
        ku.append(ujs[row])
        kk.append(pair[start[inv][row] + off, 1])
        s_l.append(np.zeros(len(row), np.int64))
        t_l.append(wjs[row])
        ku.append(ujs)
        kk.append(leaf[inv])
        s_l.append(wjs)
        t_l.append(np.zeros(len(wjs), np.int64))
    k_uk, k_key = np.concatenate(ku), np.concatenate(kk)
    order = np.lexsort((k_key, k_uk))
    k_uk, k_key = k_uk[order], k_key[order]
    first = np.flatnonzero(np.r_[True, (k_uk[1:] != k_uk[:-1]) | (k_key[1:] != k_key[:-1])])
    out = {"uk": k_uk[first], "key": k_key[first]}
    for name, vals in (("s", s_l), ("t", t_l)):
        v = np.concatenate(vals)[order]
        out[name] = np.add.reduceat(v, first) if len(v) else v
    return out


def _old_unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.unique(rows, axis=0, return_inverse=True)


def _use_old(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(intern, "add_upload", _old_add_upload)
    mp.setattr(rollup, "_moments_block", _old_moments_block)
    mp.setattr(rollup, "unique_rows", _old_unique_rows)
    mp.setattr(perload, "unique_rows", _old_unique_rows)


# ---- the comparison -------------------------------------------------------------------------

def _store(path: Path) -> Store:
    """Field traces (320 frames, every 17th the same nameless one: distinct trace stacks
    meet in one release stack; a third of the samples idle), two releases, and the
    fleet tests' traces with markers and a long frame that busy samples are attributed to."""
    st = Store(path)
    for i in range(12):
        st.append(f"f{i}", {"app": "shop", "release": f"1.{i % 2}", "sampleInterval": 10,
                            "receivedAt": T0 + i * 1e3, "route": f"/r{i % 3}",
                            "pageLoad": f"pl{i // 3}"},
                  None, gzipped=gzip.compress(field_trace(i % 5, 1500)))
    rng = np.random.default_rng(3)
    for i in range(6):
        upload(st, f"m{i}", make_trace(rng, 300, hot="slowThing" if i % 2 else None,
                                       hot_share=0.3, idle_share=0.4),
               app="shop", release="1.0", route="/m", receivedAt=T0 + (20 + i) * 1e3,
               timeline={"longFrames": [{"start": 100.0, "duration": 400.0,
                                         "blockingDuration": 350.0}], "interactions": []})
    return st


def _tables(st: Store) -> dict:
    tail = read_tail(st, read_manifest(st.path), limit=10**6, max_samples=10**9)
    assert tail.uploads == 18
    out = {}
    for rkey, entry in tail.manifest["releases"].items():
        for kind, parts in entry["parts"].items():
            for i, e in enumerate(parts):
                t = e["build"]() if "build" in e else e.get("table")
                out[(rkey, kind, i)] = None if t is None else t.to_pydict()
    return out


@pytest.mark.parametrize("dense", [True, False])
def test_the_new_interning_gives_the_tables_of_the_old(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dense: bool) -> None:
    st = _store(tmp_path / "store")
    if not dense:  # every block's (upload, key) sums by the sort instead
        monkeypatch.setattr(rollup, "DENSE_CELLS", 0)
        monkeypatch.setattr(rollup, "DENSE_PER_ROW", 0)
    new = _tables(st)
    with monkeypatch.context() as mp:
        _use_old(mp)
        old = _tables(st)
    assert new.keys() == old.keys()
    kinds = {k[1] for k in new}
    assert {"stacks", "upload_frames", "weights", "rollup_moments", "rollup_perload"} <= kinds
    for key in old:
        assert new[key] == old[key], key
    st.close()


def test_no_per_stack_walk_for_parents_that_come_first(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The readers give parents before children: no stack goes through the walk (the
    old loop called `Release.stack` once per trace stack)."""
    calls = []
    stack = intern.Release.stack
    monkeypatch.setattr(intern.Release, "stack",
                        lambda self, p, f: calls.append(1) or stack(self, p, f))
    st = _store(tmp_path / "store")
    _tables(st)
    assert calls == []
    st.close()


def test_unique_rows_is_numpys() -> None:
    rng = np.random.default_rng(7)
    cases = [
        rng.integers(-3, 4, (500, 3)),  # many ties, negatives
        rng.integers(0, 2, (50, 5)),
        np.stack([rng.integers(0, 9, 300), rng.integers(-2**63, 2**63 - 1, 300,
                                                         dtype=np.int64)], axis=1),  # hashes
        np.array([[2**62, -2**62], [2**62, -2**62], [-1, 5]], np.int64),
        np.zeros((0, 2), np.int64),
        np.array([[4, 1]], np.int64),
    ]
    for a in cases:
        a = np.asarray(a, np.int64)
        uq, inv = rollup.unique_rows(a)
        want_uq, want_inv = np.unique(a, axis=0, return_inverse=True)
        assert uq.shape == want_uq.shape and (uq == want_uq).all()
        assert (inv == want_inv.reshape(-1)).all()


def test_present_frames_and_mapping_with_parents_in_any_order() -> None:
    """A stack table whose parents come after their children (no reader gives one; the
    general walk takes it): the same release stacks as parents-first order of it."""
    rel = intern.Release("a", "1")
    # trace stacks: 0 <- 2 <- 1 (1's parent is 2, a later one)
    parent = np.array([NONE, 2, 0], np.int32)
    frame = np.array([0, 1, 2], np.int32)
    got = intern.map_stacks(rel, parent, frame, [10, 11, 12])
    assert rel.stack_parent[got[1]] == got[2] and rel.stack_parent[got[2]] == got[0]
    assert got[-1] == NONE
    mark = intern.on_path(parent, np.array([1, NONE], np.int32))
    assert mark.tolist() == [True, True, True]
    assert intern.on_path(parent, np.array([0, NONE], np.int32)).tolist() == [True, False, False]
