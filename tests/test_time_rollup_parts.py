"""The Time view's rollups of a compaction batch (store/tables/timeroll.py) made and
written a grid at a time (issue 34: the six grids' rows held together, route and env as a
Python string per row, took a 3 M-sample batch's compaction from ~450 to ~800 MiB RSS),
the same rows however they are sliced, and samples with a NaN time left out, counted."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jsprof.store.tables import parts, rollup, timeroll
from jsprof.store.tables.rollup import KEYS, aggregate
from jsprof.store.tables.timeroll import TIME_KINDS, time_parts, time_rows


def _batch(uploads: int, per: int, seed: int = 1) -> tuple[dict, dict]:
    """A batch like the compactor's: uploads of `per` samples ~1 ms apart on 5 routes,
    3,000 stacks, some samples without a stack (idle and not)."""
    rng = np.random.default_rng(seed)
    cells = {"uk": list(range(uploads)), "id": [f"id{i}" for i in range(uploads)],
             "route": [f"/r{i % 5}" for i in range(uploads)],
             "env": ["prod" if i % 3 else "dev" for i in range(uploads)],
             "page_load": [f"pl{i // 2}" if i % 4 else None for i in range(uploads)]}
    n = uploads * per
    sid = rng.integers(0, 3000, n)
    sid[rng.random(n) < 0.1] = -1
    samples = {"uk": np.repeat(np.arange(uploads), per),
               "t": np.tile(np.arange(per) * 1.0, uploads) + rng.random(n) - 0.01,
               "stack_id": sid, "marker": rng.integers(-1, 4, n).astype(np.int8),
               "weight_ns": rng.integers(500_000, 2_000_000, n)}
    return cells, samples


def _summed(tables: dict[str, Any]) -> dict[str, Any]:
    """Each kind's rows summed by key and sorted by it: what a merge of its parts holds."""
    return {k: aggregate(k, tables[k].cast(parts.schemas()[k])).sort_by(
        [(c, "ascending") for c in KEYS[k]]) for k in TIME_KINDS}


def test_a_batch_s_time_rollups_are_written_a_grid_at_a_time(tmp_path: Path) -> None:
    """The peak traced while a batch's rollups are made and written is a small multiple
    of the batch's own sample arrays (all six grids' rows held at once, with a Python
    string per row for route and env, were 12.1x at this size and 8.1x at 3 M samples;
    a grid at a time 3.8x and 1.8x), and each piece the writer takes holds one grid."""
    cells, samples = _batch(120, 5000)
    own = sum(v.nbytes for v in samples.values())
    seen: list[tuple[str, set]] = []
    rels = {k: f"{k}/part-000001.parquet" for k in TIME_KINDS}

    def watched(pieces: Any) -> Any:
        for kind, t in pieces:
            seen.append((kind, set(t["grid"].to_pylist()) if "grid" in t.column_names
                         else set()))
            yield kind, t

    tracemalloc.start()
    try:
        dropped, pieces = time_parts(cells, samples, rollup.load_hash)
        got = parts.new_parts_streamed(tmp_path, rels, watched(pieces), parts.schemas())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dropped == 0
    assert peak < 6.0 * own, (peak >> 20, own >> 20)
    assert all(len(g) == 1 for kind, g in seen if kind != "rollup_timekeys")
    grids = [min(g) for kind, g in seen if kind == "rollup_time"]
    assert sorted(set(grids)) == list(range(timeroll.GRIDS)) and grids == sorted(grids)
    # the parts hold the rows made at once (the tail's way)
    read = {k: pq.read_table(tmp_path / rels[k]) for k in TIME_KINDS}
    assert {k: e["rows"] for k, e in got.items()} == {k: t.num_rows for k, t in read.items()}
    assert _summed(read) == _summed(time_rows(cells, samples, rollup.load_hash))


def test_slices_of_a_grid_are_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grid grouped in slices of whole (cell, bucket) values has the rows it has
    grouped whole: no key in two slices, nothing lost."""
    cells, samples = _batch(40, 700, seed=2)
    whole = time_rows(cells, samples, rollup.load_hash)
    monkeypatch.setattr(timeroll, "SLICE_ROWS", 997)
    sliced = time_rows(cells, samples, rollup.load_hash)
    for k in TIME_KINDS:  # every key once: slices never split one
        assert sliced[k].num_rows == whole[k].num_rows, k
        assert aggregate(k, sliced[k]).num_rows == sliced[k].num_rows, k
    assert _summed(sliced) == _summed(whole)


@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
def test_samples_with_a_nan_time_are_left_out_and_counted(bad_value: float) -> None:
    """A time that is not finite has no bucket and no key (`time_keys` raised on a NaN,
    `nice` on an infinity: the compaction of its batch failed; NaN cast to int64 is an
    arbitrary bucket): the rows are those of the other samples, and the count says how
    many were left out."""
    cells, samples = _batch(10, 300, seed=3)
    bad = samples["t"].copy()
    bad[[0, 5, 299, 1000, 2999]] = bad_value
    with_nan = dict(samples, t=bad)
    dropped, pieces = time_parts(cells, with_nan, rollup.load_hash)
    got: dict[str, list] = {k: [] for k in TIME_KINDS}
    for kind, t in pieces:
        got[kind].append(t)
    keep = np.isfinite(bad)
    want = time_rows(cells, {k: np.asarray(v)[keep] for k, v in samples.items()},
                     rollup.load_hash)
    assert dropped == 5
    assert _summed({k: pa.concat_tables(v) for k, v in got.items()}) == _summed(want)
    # every sample is in each grid's sums once: none in a bucket of its own
    rows = time_rows(cells, with_nan, rollup.load_hash)
    for g in range(timeroll.GRIDS):
        on = pa.compute.equal(rows["rollup_timeloads"]["grid"], g)
        assert pa.compute.sum(rows["rollup_timeloads"]["samples"].filter(on)).as_py() == (
            keep.sum())
        assert pa.compute.min(rows["rollup_time"]["tb"].filter(
            pa.compute.equal(rows["rollup_time"]["grid"], g))).as_py() >= 0
