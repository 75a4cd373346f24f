"""What a query's tail and a compaction batch hold in memory follows their data (issue 34).

A query reads the uploads not compacted yet into tables in memory (`tables.view.read_tail`);
500 field uploads peaked at 1.2 GB there, almost all of it the per-upload moments
(`rollup.upload_moments`: every weights row times the functions on its stack's path, all
of a batch's rows at once). They are now built a block of uploads at a time, and the rows
are consumed as their tables are built. Measured with tracemalloc (numpy's arrays are
counted there), on uploads of a real recording: QuickJS running acorn (from npm) over its
own source, a parser's deep and varied stacks."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np

from fleet_util import make_trace, upload
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.rollup import MOMENTS_BLOCK, upload_moments
from jsprof.store.tables.view import read_tail
from viewer_util import record_acorn

T0 = 1.7e12


def _tables_bytes(man: dict) -> int:
    """Bytes of the tail's tables (those `read_tail` holds in memory)."""
    entries = [e for r in man["releases"].values() for es in r["parts"].values() for e in es]
    return sum(e["table"].nbytes for e in [*entries, *man["uploads"]]
               if isinstance(e, dict) and "table" in e)


def _peak(st: Store, man: dict, limit: int) -> tuple[int, int, int]:
    """(traced peak while reading a tail of `limit` uploads, its tables' bytes, uploads)."""
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        tail = read_tail(st, man, limit)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was:
            tracemalloc.stop()
    return peak, _tables_bytes(tail.manifest), tail.uploads


def test_the_tails_memory_follows_its_tables_not_its_stack_paths(tmp_path: Path) -> None:
    body = record_acorn(tmp_path).read_bytes()
    st = Store(tmp_path / "store")
    for i in range(45):
        st.append(f"u{i}", {"app": "a", "release": "1", "receivedAt": T0 + i * 1e3,
                            "sampleInterval": 1.0}, body)
    man = read_manifest(st.path)
    read_tail(st, man, 1)  # the modules a tail imports, once
    p15, t15, n15 = _peak(st, man, 15)
    p45, t45, n45 = _peak(st, man, 45)
    assert (n15, n45) == (15, 45)
    # Each upload adds its tables, and while a kind's table is built its rows are held
    # too (one column at a time: less than the table again); a third for slack. Before,
    # the 30 more uploads added 38x their tables (124 MB for 3.3 MB of tables).
    assert p45 - p15 <= 3 * (t45 - t15), (p15, p45, t15, t45)
    # In all: that, one block of the moments' expanded rows (~12 arrays of 8 bytes a
    # row), a few copies of one upload's body as it is parsed. Before: 190 MB, 36x the
    # tables; now ~28 MB of a bound of ~42.
    assert p45 <= 3 * t45 + 96 * MOMENTS_BLOCK + 4 * len(body), (p45, t45)
    st.close()


def test_moments_built_a_block_at_a_time_are_those_of_the_whole_batch() -> None:
    rng = np.random.default_rng(7)
    for trial in range(20):
        ns, nf = int(rng.integers(1, 300)), int(rng.integers(1, 40))
        parent = np.array([-1 if i == 0 or rng.random() < 0.1 else int(rng.integers(0, i))
                           for i in range(ns)], np.int64)
        frame = rng.integers(0, nf, ns)
        group = np.array([int(rng.integers(0, i + 1)) for i in range(nf)], np.int64)
        n = int(rng.integers(0, 2000))
        uk = rng.integers(0, 30, n)
        if trial % 2:
            uk = np.sort(uk)
        st = np.where(rng.random(n) < 0.2, -1, rng.integers(0, ns, n))
        mk = np.where(st < 0, rng.integers(-1, 5, n), -1)
        w = rng.integers(0, 10**9, n)
        whole = upload_moments(uk, st, mk, w, parent, frame, group, block=1 << 40)
        if n:  # every (upload, key) once, in order
            order = np.lexsort((whole["key"], whole["uk"]))
            assert np.array_equal(order, np.arange(len(order)))
            assert int(whole["s"].sum()) == int(w.sum())  # each row's self once
        for block in (1, 5, 97):
            got = upload_moments(uk, st, mk, w, parent, frame, group, block=block)
            for k in ("uk", "key", "s", "t"):
                assert got[k].dtype == np.int64 and np.array_equal(got[k], whole[k]), (trial, k)


def _fill(st: Store, n: int) -> int:
    rng = np.random.default_rng(5)
    total = 0
    for i in range(n):
        tr = make_trace(rng, 200, hot="slowThing" if i % 2 else None, hot_share=0.2)
        total += tr.num_samples
        upload(st, f"u{i}", tr, app="shop", release="1.0", route="/p", env="prod",
               receivedAt=T0 + i * 60e3, pageLoad=f"pl{i // 2}")
    return total


def test_the_tail_stops_at_its_samples_cap_and_counts_what_it_left(tmp_path: Path) -> None:
    st = Store(tmp_path / "store")
    _fill(st, 9)
    man = read_manifest(st.path)
    # 200 samples an upload: the cap is passed by the 3rd, which is read whole
    tail = read_tail(st, man, 500, max_samples=401)
    assert (tail.uploads, tail.pending) == (3, 6)
    tail = read_tail(st, man, 500, max_samples=400)
    assert (tail.uploads, tail.pending) == (2, 7)
    assert read_tail(st, man, 500, max_samples=10**6).uploads == 9
    st.close()


def test_a_compaction_cut_by_samples_answers_as_one_batch(tmp_path: Path) -> None:
    docs = []
    for name, cut in (("one", 10**9), ("cut", 650)):
        st = Store(tmp_path / name)
        _fill(st, 10)
        stats = compact(st, batch_samples=cut)
        assert stats.uploads == 10
        assert stats.batches == (1 if name == "one" else 3)  # 4 uploads of 200, 4, then 2
        with api.session(st, tail_limit=0) as s:
            f = Filters(app="shop")
            docs.append((api.top(s, f, None), api.list_uploads(s, f, 100)))
        st.close()
    assert docs[0] == docs[1]
