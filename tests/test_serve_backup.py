"""`jsprof serve backup` of a live store (docs/store.md, "Backup and restore"): taken from
a real `jsprof serve --workers 2` while uploads keep coming, restored by serving the copy.
Every upload acknowledged before the backup is in it, readable, once, and a duplicate when
sent again; uploads that raced the backup are in it whole or not at all."""

from __future__ import annotations

import stat
import subprocess
import threading
import time
from pathlib import Path

import orjson

from serve_util import JSPROF, READ_TOKEN, Collector, fixture_bytes
from test_serve_metrics import scrape, value

JSON = {"Content-Type": "application/json"}


def _wait_compacted(col: Collector, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        m = scrape(col)
        if value(m, "jsprof_compactor_pending_uploads") == 0:
            return m
        assert time.monotonic() < deadline, "the compactor did not catch up"
        time.sleep(0.5)


def test_backup_of_a_live_store_restores_every_acknowledged_upload(tmp_path: Path) -> None:
    store, copy = tmp_path / "st", tmp_path / "backup"
    body = fixture_bytes()
    col = Collector(store, "--app", "shop:k1", "--workers", "2", "--compact-every", "0.5")
    before: dict[str, bytes] = {}
    raced: list[str] = []
    stop = threading.Event()
    try:
        for i in range(120):
            assert col.request("POST", f"/v1/traces?app=shop&key=k1&id=b{i}", body,
                               JSON)[0] == 202
        _wait_compacted(col)  # most claims retired into the index, some not yet
        for i in range(120, 150):
            assert col.request("POST", f"/v1/traces?app=shop&key=k1&id=b{i}", body,
                               JSON)[0] == 202
        for i in range(0, 150, 7):
            status, data = col.get(f"b{i}")
            assert status == 200
            before[f"b{i}"] = data

        def uploads_during() -> None:
            i = 0
            while not stop.is_set():
                uid = f"live{i}"
                if col.request("POST", f"/v1/traces?app=shop&key=k1&id={uid}", body,
                               JSON)[0] == 202:
                    raced.append(uid)
                i += 1

        t = threading.Thread(target=uploads_during)
        t.start()
        time.sleep(0.5)
        r = subprocess.run([str(JSPROF), "serve", "backup", "--store", str(store), "--to",
                            str(copy)], capture_output=True, text=True, timeout=300)
        time.sleep(0.5)
        stop.set()
        t.join()
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"jsprof serve backup: {store} -> {copy}: "), r.stdout
        # every trace and the read token: the owner's alone (a umask left it 0755)
        assert stat.S_IMODE(copy.stat().st_mode) == 0o700
        assert raced, "no upload raced the backup"
        # A second backup into the same folder is refused, in one line.
        again = subprocess.run([str(JSPROF), "serve", "backup", "--store", str(store), "--to",
                                str(copy)], capture_output=True, text=True, timeout=300)
        assert again.returncode != 0 and "exists" in again.stderr
        assert "Traceback" not in again.stderr
    finally:
        stop.set()
        col.stop()
    assert not (tmp_path / "backup.partial").exists()
    # Restore: serve the copy (it recovers the segments that were open when copied).
    col = Collector(copy, "--app", "shop:k1", "--workers", "2", "--compact-every", "0.5")
    try:
        for uid, data in before.items():
            status, got = col.get(uid)
            assert status == 200, (uid, got)
            assert orjson.loads(got) == orjson.loads(data)
        present = []
        for uid in raced:
            status, _ = col.get(uid)
            assert status in (200, 404), (uid, status)
            if status == 200:
                present.append(uid)
        # Sent again: duplicates, never stored twice.
        for i in range(0, 150, 10):
            assert col.request("POST", f"/v1/traces?app=shop&key=k1&id=b{i}", body,
                               JSON)[0] == 202
        for uid in present[:10]:
            assert col.request("POST", f"/v1/traces?app=shop&key=k1&id={uid}", body,
                               JSON)[0] == 202
        m = _wait_compacted(col)
        assert value(m, "jsprof_uploads_accepted_total", app="shop") == 0
        assert value(m, "jsprof_uploads_duplicate_total", app="shop") == 15 + len(present[:10])
        status, _, data = col.request("GET", "/v1/query/top?app=shop&format=json",
                                      headers={"Authorization": f"Bearer {READ_TOKEN}"})
        assert status == 200
        assert orjson.loads(data)["traces"] == 150 + len(present)
    finally:
        col.stop()
    r = subprocess.run([str(JSPROF), "serve", "check", "--store", str(copy)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{150 + len(present)} uploads" in r.stdout, r.stdout


def test_backup_into_the_store_itself_is_refused_in_one_line(tmp_path: Path) -> None:
    """A --to inside the store would copy its own copy (claims/bk.partial/claims/...) until
    the path is too long, and leave those folders in the store's claims."""
    from jsprof.store import Store

    store = tmp_path / "st"
    Store(store).close()
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    for inside in (store / "claims" / "bk", store / "bk"):
        r = subprocess.run([str(JSPROF), "serve", "backup", "--store", str(store), "--to",
                            str(inside)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "inside the store" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_a_backup_that_cannot_read_the_store_names_the_file(tmp_path: Path) -> None:
    """The failing file is named (it said '--to DIR: cannot write the backup (Is a
    directory)' when the store's own read-token could not be read), no copy is left."""
    from jsprof.store import Store

    store = tmp_path / "st"
    Store(store).close()
    (store / "read-token").mkdir()  # not a file: reading it fails
    r = subprocess.run([str(JSPROF), "serve", "backup", "--store", str(store), "--to",
                        str(tmp_path / "bk")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{store / 'read-token'}: Is a directory" in r.stderr, r.stderr
    assert not (tmp_path / "bk").exists() and not (tmp_path / "bk.partial").exists()
