"""A prune of the tables keeps the files it drops for the grace a merge gives: a query
holding the manifest from before the prune reads on, and a prune killed (SIGKILL) at any
point loses nothing and counts nothing twice."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet_util import KILL_AT, fill_days
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.retention import prune
from jsprof.store.tables import intern, merge
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import part_path, read_manifest
from jsprof.store.tables.merge import merge_parts
from jsprof.store.tables.prune import prune_tables

DAY = 86400e3
T0 = 1.7e12 - (1.7e12 % DAY)  # a UTC midnight
CUT = T0 + DAY + 12 * 3600e3  # mid day 2: whole parts dropped, the cut day's rewritten


def _fill(path: Path) -> None:
    st = Store(path)
    fill_days(st, T0)
    compact(st)
    st.close()  # sealed: a prune in another process may rewrite its segments


def _answers(s: api.Session) -> dict:
    f = Filters(app="shop")
    return {
        "top": api.top(s, f, None),
        "flame": api.flame(s, f, fmt="svg"),
        "list": api.list_uploads(s, f, limit=1000),
        "series": api.series(s, f, "slowThing", by="day"),
    }


def _listed(man: dict) -> set[str]:
    return {part_path(e) for e in man["uploads"]} | {
        part_path(e) for r in man["releases"].values() for v in r["parts"].values() for e in v
    }


def _on_disk(tdir: Path) -> set[str]:
    return {str(p.relative_to(tdir)) for p in tdir.rglob("*.parquet")}


_CHILD = KILL_AT + """
from jsprof.store import Store
from jsprof.store.tables import prune as c
c._prune_hook = kill_at(sys.argv[3])
from jsprof.store.retention import prune
res = prune(Store(sys.argv[1]), float(sys.argv[2]))
print(res.removed, res.tables_removed)
"""


def _prune_in_child(path: Path, stage: str = "none") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CHILD, str(path), repr(CUT), stage],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, dict]:
    """A store, and the answers of the same store pruned at CUT (a copy, pruned here)."""
    path = tmp_path / "store"
    _fill(path)
    ref = tmp_path / "ref"
    shutil.copytree(path, ref)
    st = Store(ref)
    assert prune(st, CUT).tables_removed == 10
    with api.session(st) as s:
        expected = _answers(s)
    assert expected["top"]["traces"] == 14
    st.close()
    return path, expected


def test_a_query_holding_the_manifest_from_before_a_prune_reads_on(stores) -> None:
    """The prune runs in another process while the query holds its snapshot: the dropped
    parts' files stay (listed in `obsolete`), so the query answers as before the prune;
    they used to be deleted at once and the query failed ("cannot be read")."""
    path, expected = stores
    st = Store(path)
    tdir = path / "tables"
    with api.session(st, tail_limit=0) as s:
        before = _answers(s)
        assert before["top"]["traces"] == 24
        proc = _prune_in_child(path)
        assert proc.returncode == 0 and proc.stdout.split() == ["10", "10"], proc.stderr
        assert _answers(s) == before  # its own snapshot, every part of it still there
        man = read_manifest(path)
        dropped = {o["path"] for o in man.get("obsolete", [])}
        assert dropped and not dropped & _listed(man)
        assert all((tdir / p).exists() for p in dropped)
    with api.session(st, tail_limit=0) as s:
        assert _answers(s) == expected
    # After the grace the files go (by the next merge, or prune), and nothing else does.
    assert merge_parts(path).deleted == 0
    assert merge_parts(path, now=time.time() + merge.GRACE_S).deleted == len(dropped)
    assert _on_disk(tdir) == _listed(read_manifest(path))
    with api.session(st, tail_limit=0) as s:
        assert _answers(s) == expected
    st.close()


def test_a_later_prune_removes_the_files_whose_grace_is_over(stores) -> None:
    path, expected = stores
    st = Store(path)
    assert prune(st, CUT).tables_removed == 10
    first = {o["path"] for o in read_manifest(path)["obsolete"]}
    assert first and first <= _on_disk(path / "tables")
    # A second prune, past the first one's grace: those files go, its own stay.
    prune_tables(path, CUT + 3600e3, now=time.time() + merge.GRACE_S)
    man = read_manifest(path)
    assert not first & {o["path"] for o in man["obsolete"]}
    assert not first & _on_disk(path / "tables")
    assert _on_disk(path / "tables") == _listed(man) | {o["path"] for o in man["obsolete"]}
    st.close()


@pytest.mark.parametrize("stage", ["segments", "written", "committed"])
def test_a_prune_killed_at_any_point_loses_nothing_and_counts_nothing_twice(
    stores, stage: str
) -> None:
    path, expected = stores
    proc = _prune_in_child(path, stage)
    assert proc.returncode == -9, proc.stderr  # killed there, by SIGKILL
    st = Store(path)
    with api.session(st, tail_limit=0) as s:  # as the kill left it
        assert _answers(s) == expected
    # The prune again (the collector's next hourly one): it finishes the job.
    tdir = path / "tables"
    prune(st, CUT)
    merge._swept.discard(str(tdir))  # the next merging process sweeps what the kill left
    merge_parts(path, now=time.time() + merge.GRACE_S)
    man = read_manifest(path)
    assert not man.get("obsolete") and _on_disk(tdir) == _listed(man)
    with api.session(st, tail_limit=0) as s:
        assert _answers(s) == expected
    # And the tables rebuilt from the raw uploads say the same.
    shutil.rmtree(tdir)
    intern.forget()
    with api.session(st) as s:
        assert _answers(s) == expected
    st.close()
