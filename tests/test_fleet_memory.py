"""A query's memory follows the question, not the store's history (issue 34: a collector
worker peaked at ~1 GiB answering `/v1/query/flame` over 3,000 uploads and kept climbing).

Memory is measured as allocations Python knows of (tracemalloc: objects and numpy's
buffers), which no other process can change: a fact of the code, not of a busy machine.
The engine's own (DuckDB's) memory is bounded by its settings (`fleet/engine.py`)."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from fleet_util import make_trace, upload
from jsprof.fleet import api, timecourse
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact

SAMPLES = 6000  # per upload, as the soak benchmark's field traces


def _store(path: Path, uploads: int) -> Path:
    """`uploads` uploads of one page's few stacks, each SAMPLES samples: more uploads add
    samples, never a distinct stack or function."""
    rng = np.random.default_rng(34)
    traces = [make_trace(rng, SAMPLES) for _ in range(3)]
    st = Store(path)
    try:
        for i in range(uploads):
            upload(st, f"u{i}", traces[i % 3], app="shop", release="1.0", route="/p",
                   pageLoad=f"pl{i}")
        compact(st)
    finally:
        st.close()
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("fleetmem")
    return {n: _store(root / f"s{n}", n) for n in (10, 40)}


def _time_course_peak(path: Path) -> tuple[int, dict]:
    """Bytes allocated at the peak of the merged Time view (beyond what the selection
    holds already), and its block."""
    with api.session(api.open_store(path)) as s:
        from jsprof.fleet import query

        sel = query.select(s.engine, s.snap, Filters(app="shop"))
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            ft = timecourse.time_course(s.engine, s.snap, sel, "shop")
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    return peak, ft


def test_the_time_view_holds_buckets_not_samples(stores: dict[int, Path]) -> None:
    small, ft_small = _time_course_peak(stores[10])
    large, ft_large = _time_course_peak(stores[40])
    assert ft_large["uploads"] == 40 and ft_small["uploads"] == 10
    # Before: every sample of the picked uploads read into numpy columns (time, stack,
    # marker, weight, upload: 40 bytes a sample) and the parts they sit in besides:
    # 40 uploads of 6,000 samples peaked at 29 MB, 4x the 10 uploads' 7.3 MB. Now the engine
    # sums them per (function, bucket): a few hundred cells, whatever the uploads.
    samples_bytes = 40 * SAMPLES * 40
    assert large < samples_bytes / 8, (small, large)
    assert large < small * 1.5 + (256 << 10), (small, large)
    print(f"time view's peak: {small} B (10 uploads), {large} B (40 uploads)")


def test_the_time_view_sums_each_function_exactly(stores: dict[int, Path]) -> None:
    # The engine's sums are integer ns: each function's lane adds up to its self time,
    # and the buckets to the total, to the ns (the float sums it replaces drifted by up
    # to 2.6e-5 ms on a soak store).
    _, ft = _time_course_peak(stores[40])
    for r in ft["fns"]:
        assert round(sum(int(round(v * 1e6)) for v in r["v"])) == round(r["self"] * 1e6)
    assert sum(round(v * 1e6) for v in ft["bucketMs"]) == round(ft["totalMs"] * 1e6)
    assert sum(ft["bucketLoads"]) >= 40  # each page load in one bucket at least


def _run(con: duckdb.DuckDBPyConnection, t: np.ndarray) -> object:
    con.register("s_t", pa.table({"t": t}))

    def run(sql: str, *params: object) -> dict[str, np.ndarray]:
        got = con.sql(f"WITH s AS (SELECT * FROM s_t) {sql}", params=list(params))
        return {c: np.asarray(v) for c, v in got.fetchnumpy().items()}

    return run


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 101, 1000, 4321])
def test_the_99th_percentile_is_numpys_from_two_order_statistics(n: int) -> None:
    rng = np.random.default_rng(n)
    t = np.round(rng.exponential(3000.0, n), 1) - 20.0  # ties, and some before 0
    con = duckdb.connect()
    try:
        got = timecourse._percentile99(_run(con, t), "true", n)
    finally:
        con.close()
    assert got == np.percentile(np.maximum(t, 0.0), 99)


@pytest.mark.parametrize("w", [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 500.0, 2e3])
def test_buckets_floor_as_numpy_does(w: float) -> None:
    # Times on and beside every bucket edge: numpy's `t // w` and the engine's agree.
    edges = np.arange(0, 3000) * w
    x = np.concatenate([edges, np.nextafter(edges, -1.0), np.nextafter(edges, math.inf),
                        np.random.default_rng(1).uniform(0, 3000 * w, 3000), [0.0, 1e-300]])
    x = np.maximum(x, 0.0)
    con = duckdb.connect()
    try:
        con.register("xs", pa.table({"x": x, "w": np.full(len(x), w)}))
        got = con.sql(f"SELECT {timecourse.floor_div_sql('x', 'w')} AS b FROM xs").fetchnumpy()["b"]
    finally:
        con.close()
    assert np.array_equal(np.asarray(got, np.float64), x // w)


def test_a_part_is_checked_a_chunk_at_a_time(tmp_path: Path) -> None:
    # Each worker checks each new part's CRC once; a merged part is up to hundreds of MB,
    # which read whole (`read_bytes`) was a transient of its size in the worker.
    import os
    import zlib

    from jsprof.store.tables import parts
    from jsprof.store.tables.manifest import CompactError

    data = os.urandom(12 << 20)
    (tmp_path / "p.parquet").write_bytes(data)
    entry = {"path": "p.parquet", "bytes": len(data), "crc32": zlib.crc32(data)}
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        assert parts.verify_part(tmp_path, entry) == str(tmp_path / "p.parquet")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 3 << 20, peak  # before: 12 MB, the part's size
    # and a damaged part is still found
    bad = dict(entry, crc32=entry["crc32"] ^ 1)
    (tmp_path / "q.parquet").write_bytes(data)
    with pytest.raises(CompactError, match="damaged"):
        parts.verify_part(tmp_path, dict(bad, path="q.parquet"))


def test_the_checked_parts_a_worker_remembers_stay_within_a_few_mib(tmp_path: Path,
                                                                    monkeypatch) -> None:
    # A collector worker remembers each part it checked (path -> inode, size, mtime, CRC);
    # its compactor makes a part every few seconds and merges them away, so over days the
    # paths seen only grow: the bound is what the memory comes to.
    import zlib

    from jsprof.store.tables import parts

    monkeypatch.setattr(parts, "_verified", {})
    d = tmp_path / "tables" / "samples" / "rkey=c2e927918b374b54" / "2026-12-05"
    d.mkdir(parents=True)
    n = 400
    entries = []
    for i in range(n):
        p = d / f"part-{i:06d}.parquet"
        p.write_bytes(b"PAR1" + bytes([i % 256]) * 64)
        data = p.read_bytes()
        entries.append({"path": str(p.relative_to(tmp_path)), "bytes": len(data),
                        "crc32": zlib.crc32(data)})
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for e in entries:
            parts.verify_part(tmp_path, e)
        per_entry = (tracemalloc.get_traced_memory()[0] - base) / n
    finally:
        tracemalloc.stop()
    assert len(parts._verified) == n
    assert per_entry * parts._VERIFIED_MAX < 8 << 20, per_entry  # before: 200,000 entries
    # Past the bound the oldest go, one at a time; the rest are still known.
    monkeypatch.setattr(parts, "_VERIFIED_MAX", 100)
    p = d / "part-new.parquet"
    p.write_bytes(b"PAR1new")
    parts.verify_part(tmp_path, {"path": str(p.relative_to(tmp_path)), "bytes": 7,
                                 "crc32": zlib.crc32(b"PAR1new")})
    assert len(parts._verified) == 100
    assert str(p) in parts._verified
    assert str(tmp_path / entries[-1]["path"]) in parts._verified
    assert str(tmp_path / entries[0]["path"]) not in parts._verified
