"""What a prune's rewrite of a segment does to the counts queries show: `pendingUploads`
(counted from trailers) and the compactor's list of damaged records."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from fleet_util import make_trace, upload
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store import segment as seg
from jsprof.store.retention import prune
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.view import read_tail

T0 = 1.7e12
MIN = 60e3


def _fill(st: Store, n: int, start: int = 0) -> None:
    rng = np.random.default_rng(start)
    for i in range(start, start + n):
        upload(st, f"u{i}", make_trace(rng, 100), app="shop", release="1.0",
               receivedAt=T0 + i * MIN)


def _heads(path: Path) -> list[seg.RecordHeader]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return [h for h in seg.scan(fd) if isinstance(h, seg.RecordHeader)]
    finally:
        os.close(fd)


def test_pending_uploads_count_what_a_prune_left_in_a_segment(tmp_path: Path) -> None:
    """A sealed segment's trailer counts record numbers; after a prune rewrote it without
    some records, those numbers are gaps and were counted as pending uploads."""
    st = Store(tmp_path / "store")
    _fill(st, 8)
    st.close()  # sealed: counted from its trailer
    st = Store(tmp_path / "store")
    assert prune(st, T0 + 3 * MIN).removed == 3  # u0-u2 go, the segment is rewritten
    assert st.count_uploads() == 5 == len(st)
    cursors = [c for c, *_ in st.iter_uploads()]
    assert [st.count_uploads(c) for c in cursors] == [4, 3, 2, 1, 0]
    tail = read_tail(st, read_manifest(st.path), limit=2)
    assert (tail.uploads, tail.pending) == (2, 3)
    with api.session(st) as s:
        assert api.top(s, Filters(app="shop"), 3)["traces"] == 5 and s.snap.pending == 0
    st.close()


def _damage(path: Path, body_of: int | None = None, header_of: int | None = None) -> None:
    heads = _heads(path)
    data = bytearray(path.read_bytes())
    if body_of is not None:
        data[heads[body_of].end - 5] ^= 0x04  # its body fails its checksum
    if header_of is not None:
        data[heads[header_of].offset + 20] ^= 0x10  # a header: the scan resyncs past it
    path.write_bytes(bytes(data))


def test_damaged_records_follow_a_prune_that_rewrites_their_segment(tmp_path: Path) -> None:
    path = tmp_path / "store"
    st = Store(path)
    _fill(st, 8)
    st.close()
    (segment,) = (path / "segments").glob("*.seg")
    _damage(segment, body_of=5, header_of=1)
    st = Store(path)
    assert compact(st).damaged == 2
    assert len(read_manifest(path)["damaged"]) == 2
    # Cut before u3: u0 and u2 go, and the damaged bytes of u1 with them (to quarantine/);
    # the damaged u5 stays, at a new offset.
    prune(st, T0 + 3 * MIN)
    (d,) = read_manifest(path)["damaged"]
    (u5,) = [h for h in _heads(segment) if h.upload_id == "u5"]
    assert (d["offset"], d["length"]) == (u5.offset, u5.end - u5.offset)
    assert [(f.segment, f.offset) for f in st.check().findings] == [(d["segment"], u5.offset)]
    with api.session(st) as s:
        assert api.notes(s)["damagedRecords"] == 1
    # Cut after it: the damaged record is gone from the store, and from the count.
    prune(st, T0 + 6 * MIN)
    assert read_manifest(path)["damaged"] == []
    with api.session(st) as s:
        assert api.notes(s)["damagedRecords"] == 0
        assert api.top(s, Filters(app="shop"), 3)["traces"] == 2
    st.close()


def test_a_deleted_segment_takes_its_damaged_records_out_of_the_count(tmp_path: Path) -> None:
    path = tmp_path / "store"
    st = Store(path)
    _fill(st, 4)
    st.close()
    st = Store(path)
    _fill(st, 2, start=10)  # a second segment, newer
    st.close()
    (first,) = [p for p in (path / "segments").glob("*.seg")
                if _heads(p)[0].upload_id == "u0"]
    _damage(first, body_of=2)
    st = Store(path)
    assert compact(st).damaged == 1
    prune(st, T0 + 5 * MIN)  # the first segment goes whole
    assert not first.exists() and read_manifest(path)["damaged"] == []
    with api.session(st) as s:
        assert api.notes(s)["damagedRecords"] == 0
    st.close()


def _blocked_on_flock(pid: int) -> bool:
    """Whether process `pid` waits for a flock (a `->` line of /proc/locks)."""
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if len(f) > 5 and f[1] == "->" and f[2] == "FLOCK" and f[5] == str(pid):
            return True
    return False


def test_a_prune_before_the_first_compaction_holds_the_tables_lock(tmp_path: Path) -> None:
    """A prune of a store with no tables/ yet against a compactor that starts meanwhile (a
    first `jsprof fleet ... --store` beside the collector's pruner): the compactor must wait
    for the prune, or it lists a damaged record at the offset the prune's rewrite moves."""
    path = tmp_path / "store"
    st = Store(path)
    _fill(st, 8)
    st.close()
    (segment,) = (path / "segments").glob("*.seg")
    _damage(segment, body_of=5)
    st = Store(path)
    assert not (path / "tables").exists()
    real = st.prune_segments
    compactor: list[subprocess.Popen] = []

    def prune_segments(*a: object, **kw: object) -> object:
        # The compactor starts once the prune has looked for tables/, before it rewrites
        # the segment; the rewrite goes on when the compactor finished or waits for the lock.
        p = subprocess.Popen(
            [sys.executable, "-c", "import sys; from jsprof.store import Store; "
             "from jsprof.store.tables.compact import compact; compact(Store(sys.argv[1]))",
             str(path)],
        )
        compactor.append(p)
        deadline = time.monotonic() + 120
        while p.poll() is None and not _blocked_on_flock(p.pid):
            assert time.monotonic() < deadline, "the compactor neither ran nor waited"
            time.sleep(0.02)
        return real(*a, **kw)

    st.prune_segments = prune_segments  # type: ignore[method-assign]
    try:
        assert prune(st, T0 + 3 * MIN).removed == 3  # u0-u2 go, the segment is rewritten
    finally:
        for p in compactor:
            assert p.wait(timeout=120) == 0
    (u5,) = [h for h in _heads(segment) if h.upload_id == "u5"]
    (d,) = read_manifest(path)["damaged"]
    assert (d["offset"], d["length"]) == (u5.offset, u5.end - u5.offset)
    assert [(f.segment, f.offset) for f in st.check().findings] == [(d["segment"], u5.offset)]
    with api.session(st) as s:
        assert api.notes(s)["damagedRecords"] == 1
        assert api.top(s, Filters(app="shop"), 3)["traces"] == 4
    st.close()


def test_a_kept_tail_stops_counting_damage_once_compacted_and_pruned(tmp_path: Path) -> None:
    """A collector worker keeps the tail it read between queries (`kept_tail`), and with
    it the damaged records it met there. They stayed counted for as long as the kept tail
    lived: after the compactor had listed them and a prune had removed them (their
    segment deleted, the manifest's list emptied), every query still said 2. Now damage
    the compactor's cursor has passed is the manifest's to count, and a segment of damage
    not compacted yet that a prune rewrote starts the kept tail anew; the counts are a
    fresh read's."""
    from jsprof.store.tables import kept_tail

    def notes(keep: bool) -> int:
        with api.session(st, keep_tail=keep) as s:
            return api.notes(s)["damagedRecords"]

    path = tmp_path / "store"
    kept_tail.forget()
    st = Store(path)
    _fill(st, 8)
    st.close()
    (first,) = (path / "segments").glob("*.seg")
    _damage(first, body_of=5, header_of=1)
    st = Store(path)
    assert notes(True) == notes(False) == 2  # met in the tail
    st.close()
    # A second segment, read after the first (segment names begin with their writer's
    # start in seconds: one of the same second may sort first), still in the tail after
    # the compaction below.
    while int(time.time()) <= int(first.name.split("-", 1)[0]):
        time.sleep(0.05)
    st = Store(path)
    _fill(st, 2, start=10)
    assert [_heads(p)[0].upload_id for p in sorted((path / "segments").glob("*.seg"))] == \
        ["u0", "u10"]
    assert notes(True) == notes(False) == 2

    class Stop(Exception):
        pass

    def stop_after_the_first_segment(stats: object) -> None:
        if stats.uploads > 6:
            raise Stop

    try:
        compact(st, batch=6, progress=stop_after_the_first_segment)
    except Stop:
        pass
    assert len(read_manifest(path)["damaged"]) == 2 and read_manifest(path)["nextUk"] == 6
    assert notes(True) == notes(False) == 2  # listed by the manifest, counted once
    prune(st, T0 + 8 * MIN)  # the first segment goes whole, its damage with it
    assert not first.exists() and read_manifest(path)["damaged"] == []
    assert notes(True) == notes(False) == 0
    with api.session(st, keep_tail=True) as s:
        assert api.top(s, Filters(app="shop"), 3)["traces"] == 2
    st.close()
    kept_tail.forget()


def test_a_kept_tail_follows_a_prune_that_rewrites_damage_not_compacted(
        tmp_path: Path) -> None:
    """No compaction yet: a prune rewrites the segment, dropping u1's damaged bytes and
    moving the damaged u5. The kept tail counted both at their old places (2); a fresh
    read meets u5 only."""
    from jsprof.store.tables import kept_tail

    def notes(keep: bool) -> int:
        with api.session(st, keep_tail=keep) as s:
            return api.notes(s)["damagedRecords"]

    path = tmp_path / "store"
    kept_tail.forget()
    st = Store(path)
    _fill(st, 8)
    st.close()
    (segment,) = (path / "segments").glob("*.seg")
    _damage(segment, body_of=5, header_of=1)
    st = Store(path)
    assert notes(True) == notes(False) == 2
    prune(st, T0 + 3 * MIN)
    assert notes(True) == notes(False) == 1
    st.close()
    kept_tail.forget()
