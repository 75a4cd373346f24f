"""Queries only read (issue 34): `jsprof fleet` on a store writes nothing (no compaction, no
merge, no lock file, no temporary file), answers the same to a user who may only read the
store, and still counts the uploads not compacted yet (read in memory).

Before issue 34 every `jsprof fleet` query compacted and merged first, and refused to run
without write permission ("run the query as a user who may write it").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fleet_util import T0, jittered_store, make_trace, upload
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import read_manifest
from jsprof.store.tables.merge import merge_parts

QUERIES = [
    ["top", "--json"],
    ["top", "--json", "--during", "interaction"],
    ["top", "--json", "--during", "long-frame"],
    ["diff", "--json", "--base", "release=1.0.0", "--new", "release=1.1.0"],
    ["vitals", "--json"],
    ["regressions", "--json"],
    ["interactions", "--json"],
    ["export", "--format", "folded", "-o", "{out}/merged.folded"],
    ["flame", "-o", "{out}/flame.html"],
]

# Runs each query through the CLI's entry point in one process; prints what each said.
DRIVER = r"""
import contextlib, io, json, sys
from pathlib import Path
from jsprof.cli import main
store, out, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
got = []
for q in queries:
    argv = ["fleet", q[0], "--store", store, "--app", "shop",
            *[a.replace("{out}", out) for a in q[1:]]]
    so, se = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        code = main(argv)
    so.flush()
    se.flush()
    files = {p.name: p.read_text() for p in sorted(Path(out).iterdir())}
    for p in Path(out).iterdir():
        p.unlink()
    got.append({"q": q, "code": code, "out": so.buffer.getvalue().decode(),
                "err": se.buffer.getvalue().decode(),
                "files": files})
print(json.dumps(got))
"""


def _timeline(i: int) -> dict:
    return {
        "longFrames": [{"start": 20.0 + 40 * i, "duration": 900.0, "blockingDuration": 400.0,
                        "scripts": []}],
        "interactions": [{"id": 1, "type": "click", "start": 100.0 + 10 * i, "duration": 500.0,
                          "processingStart": 105.0 + 10 * i, "processingEnd": 400.0 + 10 * i,
                          "target": "button#buy"}],
        "load": {"lcp": 300.0 + 25 * i},
    }


def _state(root: Path) -> dict[str, tuple]:
    """Every file's bytes (hash), mode and mtime, every folder's mode and mtime (a file
    created and removed again changes its folder's)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        d = Path(dirpath)
        st = d.stat()
        out[str(d.relative_to(root)) + "/"] = (st.st_mode, st.st_mtime_ns)
        for name in files:
            p = d / name
            st = p.stat()
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(),
                                             st.st_mode, st.st_mtime_ns, st.st_size)
    return out


def _run(store: Path, out: Path, tmp: Path, read_only: bool) -> list[dict]:
    cmd = [sys.executable, "-c", DRIVER, str(store), str(out), json.dumps(QUERIES)]
    if read_only and os.geteuid() == 0:
        # root ignores file modes: run as nobody (util-linux's setpriv, as
        # test_cli_wrong_inputs does), whom the store's modes bind
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to query as another user"
        cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    home = tmp.parent / "home"  # what a library may keep there is not the query's doing
    env = dict(os.environ, TMPDIR=str(tmp), HOME=str(home), JSPROF_NO_COLOR="1",
               COLUMNS="120")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def store() -> Iterator[Path]:
    # Where another user can reach it (pytest's own folders are root's alone).
    root = Path(tempfile.mkdtemp(prefix="jsprof-readonly-"))
    root.chmod(0o755)
    try:
        yield _fill(root)
    finally:
        for p in [root, *root.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(root)


def _fill(root: Path) -> Path:
    path = jittered_store(root / "store", 34, {"1.0.0": 1.0, "1.1.0": 1.0}, loads=6,
                          interactions=True)
    st = Store(path)
    compact(st)
    merge_parts(st.path)
    st.close()
    # The tail: stored after the last compaction, read by every query in memory.
    st = Store(path)
    rng = np.random.default_rng(34)
    for i in range(4):
        upload(st, f"tail-{i}", make_trace(rng, 300), app="shop", release="1.1.0",
               route="/cart", receivedAt=T0 + 7200e3 + i * 1e3, pageLoad=f"tail-{i}",
               timeline=_timeline(i))
    st.close()
    return path


def test_queries_write_nothing_and_answer_a_reader_alike(store: Path) -> None:
    before = _state(store)
    compacted = read_manifest(store)["nextUk"]
    assert compacted == 12
    out, tmp, home = (store.parent / d for d in ("out", "tmp", "home"))
    for d in (out, tmp, home):
        d.mkdir()
        d.chmod(0o777)  # the reader's outputs (flame, export), temporary files and home
    writer = _run(store, out, tmp, read_only=False)
    assert _state(store) == before, "a query changed the store"
    assert list(tmp.iterdir()) == [], "a query left temporary files"
    for r in writer:
        assert r["code"] in (0, 1), r  # regressions: 1 when it finds any
    top = json.loads(writer[0]["out"])
    # the 4 uploads not compacted are in the answer (the tail, read in memory)
    assert top["traces"] == 16 and top["pendingUploads"] == 0
    during = json.loads(writer[2]["out"])
    assert during["traces"] == 16 and during["totalMs"] > 0
    assert writer[7]["files"]["merged.folded"] and "<html" in writer[8]["files"]["flame.html"]

    # The same queries by a user who may only read the store: the same answers.
    for p in [store, *store.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        reader = _run(store, out, tmp, read_only=True)
    finally:
        for p in [store, *store.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    for p in [store, *store.rglob("*")]:  # as it was, for the state check
        p.chmod(before[str(p.relative_to(store)) + ("/" if p.is_dir() else "")][
            0 if p.is_dir() else 1] & 0o7777)
    assert reader == writer
    assert _state(store) == before
    assert list(tmp.iterdir()) == []


def test_a_tail_over_the_cap_is_counted_and_compact_makes_it_whole(
        store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jsprof.cli import main
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters

    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    st = api.open_store(copy)
    with api.session(st, tail_limit=1) as s:
        doc = api.top(s, Filters(app="shop"), 5)
        assert (doc["traces"], doc["pendingUploads"]) == (13, 3)
    st.close()
    assert main(["serve", "compact", "--store", str(copy)]) == 0
    assert capsys.readouterr().out.startswith("jsprof serve compact: 4 uploads compacted")
    assert read_manifest(copy)["nextUk"] == 16
    st = api.open_store(copy)
    with api.session(st, tail_limit=0) as s:
        doc = api.top(s, Filters(app="shop"), 5)
        assert (doc["traces"], doc["pendingUploads"]) == (16, 0)
    st.close()


def test_the_time_view_and_during_read_tables_not_raw_uploads(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the merged Time view and `--during` need (each sample's time on its upload's
    clock, the timelines) is in the tables (the samples table, the uploads' meta): with
    every raw read refused, both answer as before (they read raw records until issue 34)."""
    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters

    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    st.close()
    st = api.open_store(copy)
    with api.session(st) as s:
        page = api.flame(s, Filters(app="shop"))
        during = api.top(s, Filters(app="shop", during="interaction"), None)
        lf = api.top(s, Filters(app="shop", during="long-frame"), None)

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("a query read a raw upload")

    monkeypatch.setattr(Store, "get", refused)
    with api.session(st) as s:
        assert api.flame(s, Filters(app="shop")) == page
        assert api.top(s, Filters(app="shop", during="interaction"), None) == during
        assert api.top(s, Filters(app="shop", during="long-frame"), None) == lf
    st.close()
    assert '"fleetTime"' in page and during["traces"] == 16 and lf["attributedMs"] >= 0


def test_format_4_tables_are_upgraded_in_place_not_rebuilt(store: Path, tmp_path: Path) -> None:
    """Tables of format 4 lack only the samples table: read as they are (a rebuild needs
    the raw segments, which raw retention may have deleted), their uploads counted as
    having no sample times, and the next compaction adds samples from its uploads on."""
    import orjson

    from jsprof.fleet import api
    from jsprof.fleet.filters import Filters
    from jsprof.store.tables.manifest import FORMAT_VERSION
    from jsprof.store.tables.rollup import ROLLUP_KINDS

    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    st.close()
    mp = copy / "tables" / "_manifest.json"
    man = orjson.loads(mp.read_bytes())
    for entry in man["releases"].values():  # as format 4 wrote them: no samples parts
        for kind in ("samples", *ROLLUP_KINDS):  # nor rollups
            for e in entry["parts"].pop(kind):
                (copy / "tables" / e["path"]).unlink()
    man["formatVersion"] = 4
    man.pop("samplesFromUk")
    man.pop("rollups")
    mp.write_bytes(orjson.dumps(man))
    uploads_parts = man["uploads"]
    st = api.open_store(copy)
    with api.session(st) as s:
        assert api.top(s, Filters(app="shop"), 3)["traces"] == 16
        during = api.top(s, Filters(app="shop", during="interaction"), None)
        assert during["untimedUploads"] == 16 and during["samples"] == 0
        page = api.flame(s, Filters(app="shop"))
        assert '"uploadsUntimed":16' in page.replace(" ", "")
    st.close()
    # The next compaction upgrades the manifest: nothing rebuilt, samples from now on.
    st = Store(copy)
    upload(st, "late", make_trace(np.random.default_rng(1), 300), app="shop",
           release="1.1.0", route="/cart", receivedAt=T0 + 9000e3, pageLoad="late",
           timeline=_timeline(0))
    compact(st)
    st.close()
    man = orjson.loads(mp.read_bytes())
    assert man["formatVersion"] == FORMAT_VERSION and "rebuiltFrom" not in man
    assert man["samplesFromUk"] == 16 and man["uploads"][:len(uploads_parts)] == uploads_parts
    # and builds the rollups from the per-upload tables (format 5 had none)
    assert man["rollups"] and all(entry["parts"]["rollup_stacks"]
                                  for entry in man["releases"].values())
    st = api.open_store(copy)
    with api.session(st) as s:
        during = api.top(s, Filters(app="shop", during="interaction"), None)
    st.close()
    assert during["untimedUploads"] == 16 and during["samples"] > 0
