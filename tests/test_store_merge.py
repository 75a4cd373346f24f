"""Small table parts merged off the query path: bounded part count, same answers, and a
merge killed at any point leaves a store that reads the same."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fleet_util import KILL_AT, make_trace, upload
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.lock import LOCK
from jsprof.store.tables import intern, merge, parts
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import part_path, read_manifest
from jsprof.store.tables.merge import merge_parts

DAY = 86400e3
OLD = 1.7e12 - (1.7e12 % DAY)  # a UTC midnight long past: its day is over


def _now_ms() -> float:
    # Noon of today (UTC) at the latest: uploads of an open day, whatever the hour.
    t = time.time() * 1e3
    return min(t - 60e3, t - (t % DAY) + DAY / 2)


def _parts(man: dict) -> list[dict]:
    return [*man["uploads"], *(
        e for r in man["releases"].values() for v in r["parts"].values() for e in v)]


def _on_disk(tdir: Path) -> set[str]:
    return {str(p.relative_to(tdir)) for p in tdir.rglob("*.parquet")}


def _answers(st: Store) -> dict:
    """Every kind of query, as JSON-able values (the export as its file's bytes)."""
    out = {}
    with api.session(st, tail_limit=0) as s:
        f = Filters(app="shop")
        out["top"] = api.top(s, f, None)
        out["flame"] = api.flame(s, f, fmt="svg")
        out["diff"] = api.diff(s, Filters(app="shop", release="1.0"),
                               Filters(app="shop", release="1.1"), None, min_traces=1,
                               min_samples=1, flame_fmt="svg", reps=50)
        out["list"] = api.list_uploads(s, f, limit=1000)
        out["series"] = api.series(s, f, "render", by="day")
        rec = api.recording(s, f)
    from jsprof.formats.jsprof import dumps

    out["export"] = dumps(rec)
    return out


def _add(st: Store, rng: np.random.Generator, tag: str, at: float, n: int = 2) -> None:
    for i in range(n):
        for rel, hot in (("1.0", None), ("1.1", f"slow{tag}")):  # new frames each run
            upload(st, f"{rel}-{tag}-{i}", make_trace(rng, 60, hot=hot, hot_share=0.2),
                   app="shop", release=rel, receivedAt=at + i)


def test_many_runs_keep_the_part_count_bounded_and_answers_the_same(tmp_path: Path) -> None:
    merged, plain = Store(tmp_path / "merged"), Store(tmp_path / "plain")
    now = _now_ms()
    runs = 24
    for r in range(runs):
        at = (OLD if r % 3 == 0 else now) + r * 1e3  # a closed day and an open one
        for st in (merged, plain):
            _add(st, np.random.default_rng(r), str(r), at)
            compact(st)
        merge_parts(merged.path, fanout=4)
        groups: dict[tuple, int] = {}
        for e in read_manifest(merged.path)["uploads"]:
            groups[(e["rkey"], e["day"])] = groups.get((e["rkey"], e["day"]), 0) + 1
        # The closed day is one part per release once a run adds nothing to it (a run
        # that did leaves its new part beside it); the open one (fanout - 1) per level.
        closed = 2 if r % 3 == 0 else 1
        assert all(n <= closed for (_, d), n in groups.items() if d == parts.day_of(OLD))
        assert max(groups.values()) <= 3 * 3
    man, unmerged = read_manifest(merged.path), read_manifest(plain.path)
    assert len(_parts(unmerged)) >= 8 * runs
    # Each table of one release and day: 24 parts down to 5 (the closed day's 8 in one,
    # the open day's 16 in 4: levels of fanout 4); frames and stacks 25 down to 4. (The
    # bound was // 5 of all parts while the day tables were 4 of 6 kinds; with the 4
    # rollup kinds they are 8 of 10, and their own ratio is 4.8.)
    assert len(_parts(man)) <= len(_parts(unmerged)) // 4
    # New frames in every run: their parts merged by levels too (ids stay in order).
    assert max(r["frames"] for r in man["releases"].values()) > 24
    assert max(len(r["parts"]["frames"]) for r in man["releases"].values()) <= 9
    assert max(e.get("level", 0) for e in _parts(man)) >= 2
    assert _answers(merged) == _answers(plain)
    # The merged-away files stay for readers of an older manifest, then go.
    tdir = merged.path / "tables"
    listed = {part_path(e) for e in _parts(man)}
    assert _on_disk(tdir) == listed | {o["path"] for o in man["obsolete"]}
    assert man["obsolete"]
    stats = merge_parts(merged.path, now=time.time() + merge.GRACE_S)
    assert stats.deleted == len(man["obsolete"]) and not read_manifest(merged.path)["obsolete"]
    assert _on_disk(tdir) == listed
    # The interning kept in memory went on matching the merged parts: a rebuild from the
    # raw uploads gives the same tables' answers.
    answers = _answers(merged)
    shutil.rmtree(tdir)
    intern.forget()
    compact(merged)
    assert _answers(merged) == answers
    merged.close()
    plain.close()


_CHILD = KILL_AT + """
from jsprof.store.tables import merge as m
m._merge_hook = kill_at(sys.argv[2])
m.merge_parts(sys.argv[1], fanout=4)
m.merge_parts(sys.argv[1], fanout=4, grace=0)
print("not killed")
"""


@pytest.mark.parametrize("stage", ["written", "committed", "deleted"])
def test_a_merge_killed_at_any_point_leaves_a_store_that_reads_the_same(
    tmp_path: Path, stage: str
) -> None:
    st = Store(tmp_path / "store")
    now = _now_ms()
    for r in range(9):
        _add(st, np.random.default_rng(r), str(r), now + r * 1e3, n=1)
        compact(st)
    before = _answers(st)
    man0 = read_manifest(st.path)
    st.close()
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(st.path), stage],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr  # killed there, by SIGKILL
    st = Store(tmp_path / "store")
    man = read_manifest(st.path)
    tdir = st.path / "tables"
    if stage == "written":  # the old manifest, the merged files beside it unlisted
        assert man == man0
    else:  # the merged parts listed, the old ones (gone or not) no longer
        assert len(_parts(man)) < len(_parts(man0))
        assert all((tdir / part_path(e)).exists() for e in _parts(man))
    assert _answers(st) == before
    # The next run (a new process) clears what the killed one left and goes on.
    merge._swept.discard(str(tdir))
    merge_parts(st.path, fanout=4)
    merge_parts(st.path, fanout=4, grace=0)
    man = read_manifest(st.path)
    assert not man["obsolete"] and _on_disk(tdir) == {part_path(e) for e in _parts(man)}
    assert len(_parts(man)) < len(_parts(man0))
    assert _answers(st) == before
    st.close()


def test_merging_is_in_the_collectors_compactor_loop(tmp_path: Path) -> None:
    """`python -m jsprof.store.background` merges after it compacts: a store compacted
    in 20 small runs ends with fewer parts, and the same answers."""
    st = Store(tmp_path / "store")
    now = _now_ms()
    for r in range(20):
        _add(st, np.random.default_rng(r), str(r), now + r * 1e3, n=1)
        compact(st)
    before, n0 = _answers(st), len(_parts(read_manifest(st.path)))
    proc = subprocess.Popen([sys.executable, "-m", "jsprof.store.background", str(st.path),
                             "--interval", "0.2"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(_parts(read_manifest(st.path))) >= n0 // 2:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(30)
    assert _answers(st) == before
    assert json.loads((st.path / "tables" / "_manifest.json").read_text())["obsolete"]
    st.close()
    assert os.path.exists(st.path / "tables" / "_manifest.json")


def test_no_merged_part_is_over_the_row_cap(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(merge, "MERGE_MAX_ROWS", 5)
    merged, plain = Store(tmp_path / "merged"), Store(tmp_path / "plain")
    now = _now_ms()
    for r in range(12):
        at = (OLD if r % 2 else now) + r * 1e3
        for st in (merged, plain):
            _add(st, np.random.default_rng(r), str(r), at)
            compact(st)
        merge_parts(merged.path, fanout=4)
    parts = _parts(read_manifest(merged.path))
    assert any(e.get("level") for e in parts)  # merges happened, up to the cap only
    assert all(e["rows"] <= 5 for e in parts if e.get("level"))
    assert len(parts) < len(_parts(read_manifest(plain.path)))
    assert _answers(merged) == _answers(plain)
    merged.close()
    plain.close()


def test_a_query_that_read_the_manifest_before_a_merge_still_reads_its_parts(
    tmp_path: Path,
) -> None:
    """The merged-away files stay for GRACE_S: a query holding the older manifest (a
    long one on the dashboard) reads them; removed at once, it would fail."""
    st = Store(tmp_path / "store")
    now = _now_ms()
    for r in range(8):
        _add(st, np.random.default_rng(r), str(r), now + r * 1e3, n=1)
        compact(st)
    f = Filters(app="shop")
    with api.session(st, tail_limit=0) as s:
        before = api.top(s, f, None)
        assert merge_parts(st.path).written  # FANOUT parts of level 0 in each group
        assert merge_parts(st.path).deleted == 0  # within the grace
        assert api.top(s, f, None) == before  # the old snapshot's parts are all there
    with api.session(st, tail_limit=0) as s:
        assert api.top(s, f, None) == before
        assert merge_parts(st.path, now=time.time() + merge.GRACE_S).deleted
    with api.session(st, tail_limit=0) as s:
        assert api.top(s, f, None) == before
    st.close()


def test_a_backlog_past_a_days_close_leaves_the_days_part_alone_until_it_is_done(
    tmp_path: Path,
) -> None:
    """A compactor behind past a day's close adds parts to that day on each run; each
    merge pass then merged the whole closed day into one part again (a rewrite of the
    day's data every few seconds). Now the day's part stays (same file, same inode and
    mtime) while parts are landing, the new ones merge by levels, and the day becomes one
    part once a run adds nothing to it."""
    merged, plain = Store(tmp_path / "merged"), Store(tmp_path / "plain")
    day = parts.day_of(OLD)

    def run(tag: str, at: float) -> None:
        for st in (merged, plain):
            _add(st, np.random.default_rng(len(tag) * 7 + int(tag[1:])), tag, at)
            compact(st)

    def day_parts() -> dict[tuple[str, str], list[dict]]:
        """The closed day's group of each table and release."""
        man = read_manifest(merged.path)
        out: dict[tuple[str, str], list[dict]] = {}
        for e in man["uploads"]:
            if e["day"] == day:
                out.setdefault(("uploads", e["rkey"]), []).append(e)
        for rkey, r in man["releases"].items():
            for kind in ("weights", "upload_frames"):
                for e in r["parts"][kind]:
                    if e["day"] == day:
                        out.setdefault((kind, rkey), []).append(e)
        return out

    for r in range(3):
        run(f"a{r}", OLD + r * 1e3)
    merge_parts(merged.path)  # the parts are new: merged by levels only (none: 3 < 8)
    merge_parts(merged.path)  # nothing new landed: the day is one part per release
    first = day_parts()
    assert len(first) == 6 and all(len(v) == 1 for v in first.values())
    tdir = merged.path / "tables"

    def ident(e: dict) -> tuple[int, int]:
        st = (tdir / e["path"]).stat()
        return st.st_ino, st.st_mtime_ns

    before = {k: ident(v[0]) for k, v in first.items()}
    day_bytes = sum(v[0]["bytes"] for v in first.values())
    for r in range(5):  # the backlog: each run adds uploads of the closed day
        run(f"b{r}", OLD + (10 + r) * 1e3)
        merge_parts(merged.path)
        now = day_parts()
        assert all(len(v) == r + 2 for v in now.values())  # the new parts beside it
        assert {k: v[0]["path"] for k, v in now.items()} == {
            k: v[0]["path"] for k, v in first.items()}
        assert {k: ident(v[0]) for k, v in now.items()} == before  # not rewritten
    stats = merge_parts(merged.path)  # a run that added nothing: one part per group
    assert all(len(v) == 1 for v in day_parts().values())
    assert stats.written >= 6 and stats.bytes > day_bytes  # the day, written once more
    assert _answers(merged) == _answers(plain)
    merged.close()
    plain.close()


def test_a_store_only_serve_compact_compacts_is_merged_by_it(tmp_path: Path, capsys) -> None:
    """A collector run with `--compact-every 0` leaves compaction to `jsprof serve compact`
    (queries never compact, issue 34): each run merges too, with the same answers. (When
    `jsprof fleet` queries compacted, they never merged: a set of small parts per query
    that found new uploads, for ever.)"""
    from jsprof.cli import main

    merged, plain = Store(tmp_path / "merged"), Store(tmp_path / "plain")
    now = _now_ms()
    for r in range(12):
        _add(merged, np.random.default_rng(r), str(r), now + r * 1e3, n=1)
        _add(plain, np.random.default_rng(r), str(r), now + r * 1e3, n=1)
        compact(plain)
        assert main(["serve", "compact", "--store", str(merged.path)]) == 0
    capsys.readouterr()
    man, unmerged = read_manifest(merged.path), read_manifest(plain.path)
    assert len(_parts(unmerged)) >= 8 * 12
    assert len(_parts(man)) <= len(_parts(unmerged)) // 2
    assert max(e.get("level", 0) for e in _parts(man)) >= 1
    assert man["obsolete"]  # the merged-away files wait out their grace
    assert _answers(merged) == _answers(plain)
    merged.close()
    plain.close()


def test_a_querys_merge_is_bounded_and_does_not_wait_for_the_lock(tmp_path: Path) -> None:
    st = Store(tmp_path / "store")
    now = _now_ms()
    for r in range(16):  # 16 level-0 parts per group: two runs of FANOUT each
        _add(st, np.random.default_rng(r), str(r), now + r * 1e3, n=1)
        compact(st)
    before = _answers(st)
    # Another process holds the compaction lock (the collector's compactor): a query's
    # merge does nothing rather than wait.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('held', flush=True)\n"
         "time.sleep(120)\n", str(st.path / "tables" / LOCK)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        t0 = time.monotonic()
        assert merge_parts(st.path, wait=False, budget=1 << 30).written == 0
        assert time.monotonic() - t0 < 10
    finally:
        holder.kill()
        holder.wait(30)
    # A budget of one byte: one run merged per call (the first is always taken).
    n0 = len(_parts(read_manifest(st.path)))
    stats = merge_parts(st.path, wait=False, budget=1)
    assert stats.written == 1 and stats.merged >= 8
    assert len(_parts(read_manifest(st.path))) == n0 - stats.merged + 1
    assert merge_parts(st.path, wait=False).written > 1  # no budget: every group's run
    assert _answers(st) == before
    st.close()


def test_part_numbers_past_six_digits_are_read_whole() -> None:
    """A collector past a million runs (~2 months of 5 s runs) writes part-1000000: read
    as 100000, its parts would look older than the last merge pass's, and a closed day
    still being compacted would be rewritten on every run again."""
    assert parts.part_no({"path": "uploads/k/2026-01-01/part-1234567.parquet"}) == 1234567
    assert parts.part_no("weights/rkey=k/2026-01-01/part-1000001-2.parquet") == 1000001
    assert parts.part_no("uploads/k/part-000042.parquet") == 42


def test_uploads_parts_name_the_segments_they_came_from_through_merge_and_prune(
        tmp_path: Path) -> None:
    """Each uploads part's entry names the first and last segment its rows were compacted
    from (`segments`: on a bucket `GET /v1/traces/{id}` lists only that range of segment
    objects); a merged part the widest range of its parts, a part a prune rewrote the
    range of the one it replaces."""
    from jsprof.store import retention

    st = Store(tmp_path / "s")
    now = _now_ms()
    names = []
    for r in range(4):
        _add(st, np.random.default_rng(r), str(r), now - 4e3 + r * 1e3)
        names.append(sorted(p.name for p in (st.path / "segments").glob("*.seg"))[-1])
        st.rotate()
        compact(st)
    ups = read_manifest(st.path)["uploads"]
    assert [e["segments"] for e in ups] == [[n, n] for n in names for _ in range(2)]
    merge_parts(st.path, fanout=4)
    ups = read_manifest(st.path)["uploads"]
    assert [e["segments"] for e in ups] == [[names[0], names[-1]]] * 2
    retention.prune(st, now - 2.5e3)  # the day's part straddles the cut: rewritten
    after = read_manifest(st.path)["uploads"]
    assert [e["path"] for e in after] != [e["path"] for e in ups]
    assert [e["segments"] for e in after] == [[names[0], names[-1]]] * 2
