"""Merging small parts beside other processes that compact the same store: what one
process keeps in memory of a release must never stand for parts it has not read."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from fleet_util import upload
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables import intern, merge
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import part_path, read_manifest
from jsprof.store.tables.merge import merge_parts
from jsprof.trace import TraceBuilder

RES = "https://shop.example/app.js"


def _trace(path: list[str], extra: list[str] = ()) -> object:
    """Samples on one call path; `extra`: frames in the trace that no sample is on."""
    b = TraceBuilder()
    for name in extra:
        b.frame_id(name, b.resource_id(RES), 1 + len(name), 1)
    sid = b.stack_id(b.frame_id(f, b.resource_id(RES), 1 + len(f), 1) for f in path)
    for i in range(20):
        b.add_sample(10.0 * i, sid, marker="script")
    return b.build()


def _compact_elsewhere(path: Path) -> None:
    """A compaction in another process (e.g. `jsprof fleet top --store` beside a running
    collector): it appends parts this process has not read."""
    subprocess.run(
        [sys.executable, "-c", "import sys; from jsprof.store import Store; "
         "from jsprof.store.tables.compact import compact; compact(Store(sys.argv[1]))", str(path)],
        check=True, timeout=120,
    )


def _stack_ids(tdir: Path, man: dict) -> list[int]:
    out: list[int] = []
    for e in man["releases"][next(iter(man["releases"]))]["parts"]["stacks"]:
        out += pq.read_table(tdir / part_path(e), columns=["stack_id"])["stack_id"].to_pylist()
    return out


def test_merge_keeps_no_cached_release_for_parts_another_process_wrote(tmp_path: Path) -> None:
    path = tmp_path / "st"
    st = Store(path)
    at = time.time() * 1e3 - 60e3
    # Eight runs here, each adding a frame (not on any sampled stack) and no stack: eight
    # frames parts, one stacks part; this process keeps the release in memory.
    for k in range(8):
        upload(st, f"u{k}", _trace(["main", "a"], [f"x{i}" for i in range(k + 1)]),
               app="shop", release="1.0", receivedAt=at + k)
        compact(st)
    # Another process adds a stack (frames all known): a second stacks part, no frames part.
    upload(st, "u8", _trace(["main", "x1"], [f"x{i}" for i in range(8)]),
           app="shop", release="1.0", receivedAt=at + 8)
    st.close()
    _compact_elsewhere(path)
    st = Store(path)
    # Here: the eight frames parts merge (the two stacks parts do not).
    merge_parts(path, fanout=8)
    (rel,) = read_manifest(path)["releases"].values()
    assert (len(rel["parts"]["frames"]), len(rel["parts"]["stacks"])) == (1, 2)
    # A new stack compacted here must get the next id, after the other process's.
    upload(st, "u9", _trace(["main", "x2"], [f"x{i}" for i in range(8)]),
           app="shop", release="1.0", receivedAt=at + 9)
    compact(st)
    tdir = path / "tables"
    man = read_manifest(path)
    ids = _stack_ids(tdir, man)
    assert ids == list(range(len(ids))), ids
    with api.session(st, tail_limit=0) as s:
        got = api.top(s, Filters(app="shop"), None)
    st.close()
    # The same store compacted from scratch by a fresh process: the same answer.
    import shutil

    shutil.rmtree(tdir)
    intern.forget()
    st = Store(path)
    with api.session(st) as s:
        want = api.top(s, Filters(app="shop"), None)
    st.close()
    assert got == want
    # Each upload's path: x1 and x2 are self time of one upload each.
    assert {r["name"]: r["traces"] for r in got["rows"]}["x2"] == 1


def _raw(tdir: Path, e: dict) -> int:
    md = pq.read_metadata(tdir / part_path(e))
    return sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))


def test_no_merged_part_is_over_the_byte_cap(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The row cap bounds a merge's memory for weights, not for the uploads table, whose
    rows hold each upload's meta (up to 64 KiB): merged parts stay under a byte cap too."""
    import random

    monkeypatch.setattr(merge, "MERGE_MAX_BYTES", 300_000)
    merged, plain = Store(tmp_path / "merged"), Store(tmp_path / "plain")
    at = time.time() * 1e3 - 3600e3
    rnd = random.Random(5)
    for k in range(16):
        # A client's meta of ~48 KB (under serve's 64 KiB limit), not compressible.
        note = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(48_000))
        for st in (merged, plain):
            upload(st, f"u{k}", _trace(["main", "a", f"f{k % 3}"]), app="shop",
                   release="1.0", receivedAt=at + k, note=note)
            compact(st)
        merge_parts(merged.path, fanout=4)
    merge_parts(merged.path, fanout=4)  # the next run: four parts of level 1
    man = read_manifest(merged.path)
    tdir = merged.path / "tables"
    levels = [e.get("level", 0) for e in man["uploads"]]
    assert max(levels) == 1, levels  # four of ~48 KB merge, four of those would not
    assert all(_raw(tdir, e) <= 300_000 for e in man["uploads"] if e.get("level"))
    with api.session(merged, tail_limit=0) as s:
        got = (api.top(s, Filters(app="shop"), None),
               api.list_uploads(s, Filters(app="shop"), limit=100))
    with api.session(plain, tail_limit=0) as s:
        want = (api.top(s, Filters(app="shop"), None),
                api.list_uploads(s, Filters(app="shop"), limit=100))
    assert got == want
    merged.close()
    plain.close()


_MERGE_MEMORY = r"""
import os, resource, sys
from pathlib import Path
from jsprof.store.tables import intern, merge

tdir = Path(sys.argv[1])
entries = []
for i in range(16):
    # 400 uploads of ~30 KB meta each (under serve's 64 KiB), as compaction writes them
    # (one row group per batch): 16 parts of ~12 MB of column data, ~190 MB in all.
    rows = [{"uk": i * 400 + j, "id": f"u{i}-{j}", "app": "shop", "release": "1.0",
             "rkey": "k", "route": "/", "env": None, "received_at": 1.7e12 + j,
             "user_agent": None, "sample_interval": 10.0,
             "meta": '{"note": "%s"}' % os.urandom(15_000).hex(), "samples": 1,
             "total_ms": 1.0, "lost_ms": 0.0, "page_load": None} for j in range(400)]
    entries += intern.write_upload_parts(tdir, rows, i + 1)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
e = merge._merge_group(tdir, "uploads", entries, 99)
print(e["rows"], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)
"""


def test_a_merge_holds_no_more_than_a_few_parts_in_memory(tmp_path: Path) -> None:
    """A merge streams its parts' row groups into the merged part: its memory is about one
    part's, not the sum of all (uploads rows hold their meta: a day's worth of them would
    not fit). Real parts as compaction writes them, merged in a process of its own."""
    p = subprocess.run([sys.executable, "-c", _MERGE_MEMORY, str(tmp_path)],
                       capture_output=True, text=True, timeout=300, check=True)
    rows, grew_kb = map(int, p.stdout.split())
    assert rows == 6400
    # ~190 MB of meta in all: read at once (and written from one table) the peak grew by
    # more than that (~300 MB); streamed, by a few parts' worth (~60 MB).
    assert grew_kb < 120_000, grew_kb
    (merged,) = [q for q in tmp_path.rglob("part-000099.parquet")]
    t = pq.read_table(merged)
    assert t.num_rows == 6400 and t["uk"].to_pylist() == list(range(6400))
    assert t.num_rows == t["meta"].drop_null().length()


_SLOW_MERGE = r"""
import sys, time
from pathlib import Path
from jsprof.store.tables import merge as c

def waiter(ino):
    # A process blocked on our flock of the lock file: "N: -> FLOCK ... MAJ:MIN:INODE ...".
    with open("/proc/locks") as f:
        return any("->" in ln and ln.split()[6].endswith(f":{ino}") for ln in f)

def hook(stage):
    if stage == "written":  # the merged parts on disk, not in the manifest yet
        ino = (Path(sys.argv[1]) / "tables" / "_compact.lock").stat().st_ino
        Path(sys.argv[2]).write_text("written")
        deadline = time.monotonic() + 60
        while not waiter(ino) and time.monotonic() < deadline:
            time.sleep(0.05)  # until the other process waits on the lock (or sweeps)
        time.sleep(0.5)
c._merge_hook = hook
print(c.merge_parts(sys.argv[1], fanout=4).written)
"""


def test_a_fresh_process_sweep_waits_for_a_merge_in_progress(tmp_path: Path) -> None:
    """Another process's first merge removes the files no manifest lists (what a killed
    run left): never the part a running merge has written and not committed yet. Two real
    processes: one stopped between writing its merged parts and committing them, the other
    sweeping meanwhile."""
    path = tmp_path / "st"
    st = Store(path)
    at = time.time() * 1e3 - 60e3
    for k in range(4):
        upload(st, f"u{k}", _trace(["main", f"f{k}"]), app="shop", release="1.0",
               receivedAt=at + k)
        compact(st)
    with api.session(st, tail_limit=0) as s:
        before = api.top(s, Filters(app="shop"), None)
    st.close()
    flag = tmp_path / "written"
    slow = subprocess.Popen([sys.executable, "-c", _SLOW_MERGE, str(path), str(flag)],
                            stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert slow.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        # Its merged parts are on disk and unlisted: a sweep now would take them.
        sweep = subprocess.run(
            [sys.executable, "-c", "import sys; from jsprof.store.tables.merge import "
             "merge_parts; print(merge_parts(sys.argv[1], fanout=4).written)", str(path)],
            capture_output=True, text=True, timeout=120, check=True)
        assert int(slow.communicate(timeout=60)[0]) > 0
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert int(sweep.stdout) == 0  # it found the merge done
    man = read_manifest(path)
    tdir = path / "tables"
    for e in [*man["uploads"], *(x for r in man["releases"].values()
                                 for v in r["parts"].values() for x in v)]:
        assert (tdir / part_path(e)).exists(), e["path"]
    st = Store(path)
    with api.session(st, tail_limit=0) as s:
        assert api.top(s, Filters(app="shop"), None) == before
    st.close()
