"""The Parquet tables by day and release: --since skips parts, prune drops them, checksums."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from fleet_util import fill_days, make_trace, upload
from jsprof.cli import main
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.retention import prune
from jsprof.store.tables.compact import compact
from jsprof.store.tables.intern import release_key
from jsprof.store.tables.manifest import part_path, read_manifest
from jsprof.store.tables.parts import day_of

DAY = 86400e3
T0 = 1.7e12 - (1.7e12 % DAY)  # a UTC midnight


@pytest.fixture
def store(tmp_path: Path):  # noqa: ANN201
    st = Store(tmp_path / "store")
    fill_days(st, T0)
    compact(st)
    yield st
    st.close()


def _top(st: Store, **f: object) -> dict:
    with api.session(st) as s:
        return api.top(s, Filters(app="shop", **f), None)


def test_parts_by_day_and_release_with_ranges_and_since_skips_them(
    store: Store, capsys: pytest.CaptureFixture
) -> None:
    tdir = store.path / "tables"
    man = read_manifest(store.path)
    ups = man["uploads"]
    assert len(ups) == 8  # 4 days x 2 releases
    for e in ups:
        assert day_of(e["minAt"]) == day_of(e["maxAt"]) == e["day"] and e["rows"] == 3
        assert e["path"] == f"uploads/{e['rkey']}/{e['day']}/{Path(e['path']).name}"
    for entry in man["releases"].values():
        assert len(entry["parts"]["weights"]) == len(entry["parts"]["upload_frames"]) == 4
        assert len(entry["parts"]["frames"]) == len(entry["parts"]["stacks"]) == 1
    since = T0 + 2 * DAY
    full = _top(store, since=since)
    assert full["traces"] == 12
    # Parts before --since are never opened: remove them and the same query gives the
    # same answer; a query that needs them names the missing part in one line.
    for e in ups:
        if e["maxAt"] < since:
            (tdir / e["path"]).unlink()
    for entry in man["releases"].values():
        for kind in ("weights", "upload_frames"):
            for e in entry["parts"][kind]:
                if e["maxAt"] < since:
                    (tdir / e["path"]).unlink()
    assert _top(store, since=since) == full
    rel = _top(store, since=since, release="1.1")
    assert rel["traces"] == 6
    # (Whole days come from the rollups, which were not removed: a range inside the first
    # day needs its parts.)
    code = main(["fleet", "top", "--store", str(store.path), "--app", "shop",
                 "--until", repr(T0 + 12 * 3600e3)])
    err = capsys.readouterr().err
    assert code != 0 and "cannot be read" in err and len(err.strip().splitlines()) == 1, err


def test_damaged_parts_are_one_line_errors(store: Store, capsys) -> None:
    tdir = store.path / "tables"
    man = read_manifest(store.path)
    entry = man["releases"][release_key("shop", "1.1")]
    frames = tdir / part_path(entry["parts"]["frames"][0])
    data = bytearray(frames.read_bytes())
    i = data.find(b"slowThing")
    data[i] ^= 0x01  # "rlowThing": before, a silently wrong function name with rc 0
    frames.write_bytes(bytes(data))
    capsys.readouterr()
    code = main(["fleet", "top", "--store", str(store.path), "--app", "shop"])
    out, err = capsys.readouterr()
    assert code != 0 and "rlowThing" not in out
    assert err.count("\n") == 1 and "damaged" in err and str(frames) in err
    assert "Traceback" not in err
    # A torn uploads part: same, one line.
    data[i] ^= 0x01
    frames.write_bytes(bytes(data))
    up = tdir / part_path(man["uploads"][0])
    up.write_bytes(up.read_bytes()[:-100])
    # A range inside the part's day: read from its parts (whole days come from rollups).
    day0 = min(e["minAt"] for e in man["uploads"] if e["path"] == part_path(man["uploads"][0]))
    code = main(["fleet", "top", "--store", str(store.path), "--app", "shop",
                 "--until", repr(day0 + 1.0)])
    out, err = capsys.readouterr()
    assert code != 0 and err.count("\n") == 1 and str(up) in err


def test_prune_drops_partitions_and_rewrites_only_the_cut_day(store: Store) -> None:
    tdir = store.path / "tables"
    before = read_manifest(store.path)
    cut = T0 + DAY + 12 * 3600e3  # mid day 2: its 01:00 and 08:00 uploads go, 15:00 stays
    res = prune(store, cut)
    assert res.removed == res.tables_removed == 2 * 3 + 2 * 2
    man = read_manifest(store.path)
    days = {e["day"]: e for e in man["uploads"]}
    assert day_of(T0) not in days
    old = {e["path"]: e for e in before["uploads"]}
    for e in man["uploads"]:
        if e["day"] == day_of(T0 + DAY):
            assert e["path"] not in old and e["rows"] == 1 and e["minAt"] >= cut  # rewritten
        else:
            assert old[e["path"]] == e  # untouched
    listed = {part_path(e) for e in man["uploads"]} | {
        part_path(e) for r in man["releases"].values() for v in r["parts"].values() for e in v
    }
    on_disk = {str(p.relative_to(tdir)) for p in tdir.rglob("*.parquet")}
    # The dropped parts' files wait out their grace in `obsolete` (for a query that read
    # the manifest before), and are not listed.
    obsolete = {o["path"] for o in man["obsolete"]}
    assert on_disk == listed | obsolete and not listed & obsolete
    # Same answer as tables rebuilt from the pruned raw store.
    after = _top(store)
    assert after["traces"] == 14
    shutil.rmtree(tdir)
    compact(store)
    assert _top(store) == after


def test_a_long_lived_compactor_reads_only_new_frame_and_stack_parts(
    tmp_path: Path, monkeypatch
) -> None:
    """Each compaction used to rebuild every touched release's frame and stack dicts from
    all its parts. A process now keeps them between runs and reads only the parts another
    process committed since; the tables stay what a fresh rebuild gives."""
    import multiprocessing

    from jsprof.store.tables import intern

    st = Store(tmp_path / "store")
    rng = np.random.default_rng(9)

    def add(n: int, tag: str, hot: str | None = None) -> None:
        for i in range(n):
            upload(st, f"{tag}{i}", make_trace(rng, 200, hot=hot, hot_share=0.3), app="shop",
                   release="1.0", receivedAt=T0 + i * 1e3)

    def parts() -> set[str]:
        entry = read_manifest(st.path)["releases"][release_key("shop", "1.0")]
        return {str(st.path / "tables" / part_path(e))
                for k in ("frames", "stacks") for e in entry["parts"][k]}

    add(3, "a")
    compact(st)
    reads: list[str] = []
    real = intern.read_part

    def spy(pq, path, tdir, columns=None):  # noqa: ANN001, ANN202
        reads.append(path)
        return real(pq, path, tdir, columns)

    monkeypatch.setattr(intern, "read_part", spy)
    add(3, "b")
    compact(st)
    assert not [p for p in reads if "/frames/" in p or "/stacks/" in p]
    # Another process compacts (its own release state), then this one again: it reads
    # just that process's new parts.
    add(3, "c", hot="newInC")  # new frames and stacks: the child writes their parts
    before = parts()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_compact_child, (str(st.path),)) == 3
    theirs = parts() - before
    assert theirs
    add(3, "d")
    reads.clear()
    compact(st)
    assert {p for p in reads if "/frames/" in p or "/stacks/" in p} == theirs
    doc = _top(st)
    shutil.rmtree(st.path / "tables")
    intern.forget()
    assert _top(st) == doc and doc["traces"] == 12
    st.close()


def _compact_child(path: str) -> int:
    return compact(Store(path)).uploads


def test_damaged_raw_records_are_counted_by_compaction_not_silently_skipped(
    tmp_path: Path,
) -> None:
    from jsprof.store import segment as seg

    st = Store(tmp_path / "store")
    rng = np.random.default_rng(4)
    for i in range(6):
        upload(st, f"u{i}", make_trace(rng, 200), app="shop", release="1.0",
               receivedAt=T0 + i * 1e3)
    st.close()
    (path,) = (tmp_path / "store" / "segments").glob("*.seg")
    fd = os.open(path, os.O_RDONLY)
    heads = [h for h in seg.scan(fd) if isinstance(h, seg.RecordHeader)]
    os.close(fd)
    data = bytearray(path.read_bytes())
    data[heads[1].end - 3] ^= 0x10  # a body: fails its CRC
    data[heads[4].offset + 20] ^= 0x10  # a header: resynced past
    path.write_bytes(bytes(data))
    st = Store(tmp_path / "store")
    stats = compact(st)
    assert (stats.uploads, stats.damaged) == (4, 2)
    man = read_manifest(st.path)
    assert sorted(d["offset"] for d in man["damaged"]) == [heads[1].offset, heads[4].offset]
    assert "u1" in next(d["what"] for d in man["damaged"] if d["offset"] == heads[1].offset)
    upload(st, "later", make_trace(rng, 200), app="shop", release="1.0", receivedAt=T0)
    again = compact(st)  # counted once, not again
    assert (again.uploads, again.damaged) == (1, 0) and len(read_manifest(st.path)["damaged"]) == 2
    st.close()


def test_an_uploads_part_keeps_a_filter_of_its_ids(tmp_path: Path) -> None:
    """The Bloom filter of an uploads part's ids (store/tables/idfilter.py), as a part's
    footer keeps it: every id written is held (any UTF-8 id, up to the 128 characters a
    collector keeps), ids never written are excluded but for ~0.3 %, a part without one
    (an older jsprof's) may hold any id, and a file replaced is read again."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jsprof.store.tables import idfilter

    def write(path: Path, ids: list[str]) -> None:  # as parts.py writes a part
        t = pa.table({"id": ids})
        with pq.ParquetWriter(path, t.schema) as w:
            w.write_table(t)
            idfilter.put(w, idfilter.encode(t["id"]))

    ids = [f"id-{i}" for i in range(5000)] + ["é日本", "x" * 128, ""]
    path = tmp_path / "part.parquet"
    write(path, ids)
    assert all(idfilter.may_hold(path, idfilter.id_hash(i)) for i in ids)
    false = sum(idfilter.may_hold(path, idfilter.id_hash(f"other-{i}")) for i in range(20000))
    assert false < 20000 * 0.01, false
    plain = tmp_path / "old.parquet"
    pq.write_table(pa.table({"id": ids}), plain)
    assert idfilter.may_hold(plain, idfilter.id_hash("other-1"))
    write(path, ["other-1"])
    os.utime(path, ns=(1, 1))  # another file at the path: not the cached filter
    assert idfilter.may_hold(path, idfilter.id_hash("other-1"))
    assert not idfilter.may_hold(path, idfilter.id_hash("id-1"))
