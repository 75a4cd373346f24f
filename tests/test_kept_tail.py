"""A collector worker keeps the tail it read between its queries (issue 34).

Each query reads the uploads not compacted yet. In the 30-minute soak (`jsprof serve
--workers 2 --compact-every 5`, load 15-18) a round of 18 queries took minutes: every query
parsed and interned the same tail again (500 uploads: 6-8 s of CPU, 30-42 s of wall time
at that load, against 0.05-8 s for the query itself). A worker now keeps what it read
(`store.tables.kept_tail`): the next query reads only what was stored since, and after a
compaction only what the commit cut out of a kept chunk. The answers are those of a fresh
read of the same manifest. Counted here: the bodies each query parses (`read_any`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import jsprof.formats
from fleet_util import T0, make_trace, upload
from jsprof.analysis import stats
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.fleet.regressions import regressions
from jsprof.store import Store
from jsprof.store.tables import kept_tail
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest


class _Stop(Exception):
    pass


def _add(st: Store, rng: np.random.Generator, first: int, n: int) -> None:
    for i in range(first, first + n):
        rel, hot = ("1.1", "slowThing") if i % 3 == 2 else ("1.0", None)
        upload(st, f"u{i}", make_trace(rng, 200, hot=hot, hot_share=0.3), app="shop",
               release=rel, route=f"/r{i % 2}", receivedAt=T0 + i * 1e3,
               pageLoad=f"pl{i // 2}",  # two chunks a page load: vitals' prior in the tail
               timeline={"longFrames": [], "interactions": [
                   {"type": "click", "start": 5.0, "duration": 40.0 + i,
                    "processingStart": 9.0, "processingEnd": 30.0}]})


def _answers(st: Store, keep: bool) -> tuple:
    f = Filters(app="shop")
    with api.session(st, keep_tail=keep) as s:
        return (api.top(s, f, None), api.vitals(s, f),
                api.flame(s, f), api.list_uploads(s, f, limit=100),
                api.interactions(s, f, None),
                # from rollup_perload (the pairs have more than PERM_MAX_LOADS, set below)
                regressions(s, f, min_traces=1, min_samples=1))


def test_a_second_query_reads_only_what_is_new(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[int] = []
    read_any = jsprof.formats.read_any

    def counting(*a: object, **k: object) -> object:
        parsed.append(1)
        return read_any(*a, **k)

    monkeypatch.setattr(jsprof.formats, "read_any", counting)
    monkeypatch.setattr(kept_tail, "CHUNK", 3)
    monkeypatch.setattr(stats, "PERM_MAX_LOADS", 2)
    kept_tail.forget()
    rng = np.random.default_rng(11)
    st = Store(tmp_path / "store")
    _add(st, rng, 0, 10)

    def kept_query(reads: int) -> None:
        parsed.clear()
        got = _answers(st, True)
        assert len(parsed) == reads
        assert got == _answers(st, False)  # a fresh read of the same manifest

    kept_query(10)
    kept_query(0)  # nothing new: nothing parsed again (10 before the kept tail)
    _add(st, rng, 10, 4)
    kept_query(4)  # only the new ones

    def stop_after_first_batch(stats: object) -> None:
        if stats.uploads > 5:
            raise _Stop

    with pytest.raises(_Stop):
        compact(st, batch=5, progress=stop_after_first_batch)
    assert read_manifest(st.path)["nextUk"] == 5
    # the commit cut the chunk of u3-u5 after u4: u5 is read again, nothing else
    kept_query(1)
    compact(st)
    kept_query(0)
    _add(st, rng, 14, 2)
    kept_query(2)
    st.close()
    kept_tail.forget()


def test_a_store_made_again_at_the_same_path_keeps_nothing_of_the_old(
        tmp_path: Path) -> None:
    # The tail was kept by the store's path: a store removed and made again there (a test's
    # fixture, a notebook starting over, a restore into the same directory) answered with
    # the old store's uploads as well as its own. The new store's first cursor and upload
    # keys line up with what the old one kept, so nothing said to start anew.
    kept_tail.forget()
    rng = np.random.default_rng(3)
    old = Store(tmp_path / "store")
    for i in range(4):
        upload(old, f"old{i}", make_trace(rng, 200), app="shop", release="1.0",
               receivedAt=T0 + i * 1e3)
    f = Filters(app="shop")
    with api.session(old, keep_tail=True) as s:
        assert len(api.list_uploads(s, f, limit=100)["uploads"]) == 4
    shutil.rmtree(tmp_path / "store")
    new = Store(tmp_path / "store")
    for i in range(5):
        upload(new, f"new{i}", make_trace(rng, 200), app="shop", release="1.0",
               receivedAt=T0 + i * 1e3)
    with api.session(new, keep_tail=True) as s:
        kept = api.list_uploads(s, f, limit=100)
    with api.session(new, keep_tail=False) as s:
        fresh = api.list_uploads(s, f, limit=100)
    assert sorted(u["id"] for u in kept["uploads"]) == [f"new{i}" for i in range(5)]
    assert kept == fresh


def test_a_query_reads_a_bounded_number_of_new_uploads(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34: at load 24-36 a worker got a tenth of a core, and a query that read every
    upload stored since the last one (hundreds, ~16 ms of CPU each) took minutes. A query
    now reads at most `TAIL_NEW_MAX` new uploads, answers with what it has and counts the
    rest as pending; the next queries read on, and once they have, the answer is a fresh
    full read's."""
    from jsprof.store.tables import view

    parsed: list[int] = []
    read_any = jsprof.formats.read_any

    def counting(*a: object, **k: object) -> object:
        parsed.append(1)
        return read_any(*a, **k)

    monkeypatch.setattr(jsprof.formats, "read_any", counting)
    monkeypatch.setattr(kept_tail, "CHUNK", 3)
    monkeypatch.setattr(view, "TAIL_NEW_MAX", 4)
    monkeypatch.setattr(stats, "PERM_MAX_LOADS", 2)
    kept_tail.forget()
    rng = np.random.default_rng(12)
    st = Store(tmp_path / "store")
    _add(st, rng, 0, 10)
    f = Filters(app="shop")

    def query(reads: int, traces: int, pending: int) -> None:
        parsed.clear()
        with api.session(st, keep_tail=True) as s:
            doc = api.top(s, f, None)
        assert len(parsed) == reads
        assert (doc["traces"], doc["pendingUploads"]) == (traces, pending)

    query(4, 4, 6)
    query(4, 8, 2)
    query(2, 10, 0)
    assert _answers(st, True) == _answers(st, False)  # all read: a fresh full read's answer
    _add(st, rng, 10, 5)
    query(4, 14, 1)
    query(1, 15, 0)
    assert _answers(st, True) == _answers(st, False)
    st.close()
    kept_tail.forget()
