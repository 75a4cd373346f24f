"""The store's files stay few (#34): 4,000 uploads over real HTTP into `jsprof serve
--workers 2`, compacted by its compactor, leave at most 100 files (one claim file per
upload before: 4,000 of them), and nothing is lost or counted twice."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import orjson

from jsprof.store.tables.manifest import read_manifest
from serve_util import JSPROF, READ_TOKEN, Collector, fixture_bytes
from test_serve_metrics import scrape, value

N = 4000
JSON = {"Content-Type": "application/json"}


def _files(store: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for d, _, files in os.walk(store):
        top = Path(d).relative_to(store).parts
        key = top[0] if top else "root"
        out[key] = out.get(key, 0) + len(files)
    return out


def test_4000_uploads_compacted_leave_at_most_100_files(tmp_path: Path) -> None:
    import http.client

    store = tmp_path / "st"
    col = Collector(store, "--app", "shop:k1", "--workers", "2", "--compact-every", "1")
    body = fixture_bytes()
    statuses: list[int] = []
    lock = threading.Lock()

    def send(k: int) -> None:
        c = http.client.HTTPConnection(col.host, col.port, timeout=60)
        got = []
        for i in range(k, N, 8):
            c.request("POST", f"/v1/traces?app=shop&key=k1&id=u{i}", body, JSON)
            r = c.getresponse()
            r.read()
            got.append(r.status)
        c.close()
        with lock:
            statuses.extend(got)

    try:
        threads = [threading.Thread(target=send, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses == [202] * N
        # Retries of some: duplicates, answered 202 and not stored again.
        for i in range(0, N, 400):
            assert col.request("POST", f"/v1/traces?app=shop&key=k1&id=u{i}", body,
                               JSON)[0] == 202
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            m = scrape(col)
            files = _files(store)
            claims = value(m, "jsprof_store_files", dir="claims")
            if value(m, "jsprof_compactor_pending_uploads") == 0 and claims <= 10:
                break
            time.sleep(1)
        assert value(m, "jsprof_uploads_accepted_total", app="shop") == N
        assert value(m, "jsprof_uploads_duplicate_total", app="shop") == 10
        assert value(m, "jsprof_compactor_pending_uploads") == 0
        files = _files(store)
        # Parts merged away stay GRACE_S (15 min) for queries that read the manifest before
        # (the manifest lists them as obsolete), then go: the store holds the rest. (With
        # the four rollup tables, 8 tables' parts a run, those in their grace made the count
        # 93-101 a few seconds in; at rest it was 34.)
        # A compactor's run compacts, then merges (store/background.py): when the last
        # upload is counted compacted, that run's merge may not have run yet. With the
        # rollups' six tables (format 9: up to 12 tables' parts a batch) the files then read
        # 105-106 in 2 of 3 runs, so the count is the store's after its merge: polled.
        deadline = time.monotonic() + 60
        while True:
            files = _files(store)
            man = read_manifest(store)
            obsolete = sum((store / "tables" / o["path"]).exists()
                           for o in man.get("obsolete", []))
            if sum(files.values()) - obsolete <= 100 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert sum(files.values()) - obsolete <= 100, (files, obsolete)
        # Every upload is in the tables once, and reads back through its retired claim.
        assert sum(e["rows"] for e in man["uploads"]) == N
        for i in range(0, N, 397):
            status, data = col.get(f"u{i}")
            assert status == 200, data
        status, _, data = col.request(
            "GET", "/v1/query/top?app=shop&format=json",
            headers={"Authorization": f"Bearer {READ_TOKEN}"})
        assert status == 200 and orjson.loads(data)["traces"] == N
    finally:
        col.stop()
    import subprocess

    r = subprocess.run([str(JSPROF), "serve", "check", "--store", str(store)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{N} uploads" in r.stdout
    assert "per compacted upload" in r.stdout, r.stdout
