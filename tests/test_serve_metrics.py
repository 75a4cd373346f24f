"""The collector's operator endpoints on a real `jsprof serve --workers 2` on loopback:
`/metrics` (scraped and parsed with prometheus_client's own text parser) counts every
worker's uploads, refusals by reason, bytes and ack latencies; `/healthz`, `/readyz`; a
compactor made to fail shows in readyz, the metrics, the log and `jsprof serve check`."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serve_util import JSPROF, READ_TOKEN, Collector, fixture_bytes, signed_in

METRICS_TOKEN = "test-metrics-token"
JSON = {"Content-Type": "application/json"}


def scrape(col: Collector, token: str = READ_TOKEN) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, from one scrape."""
    status, headers, body = col.request(
        "GET", "/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    assert status == 200, body
    assert headers["content-type"].startswith("text/plain")
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m: dict, name: str, **labels: str) -> float:
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


def _worker_pids(col: Collector, n: int) -> list[int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kids = []
        for task in Path(f"/proc/{col.proc.pid}/task").iterdir():
            kids += [int(x) for x in (task / "children").read_text().split()]
        if len(kids) >= n:
            return kids
        time.sleep(0.1)
    raise AssertionError("the workers did not start")


def _accepted_per_worker(metrics_dir: Path) -> dict[int, float]:
    """Each worker's own count of stored uploads, from its file in the multiprocess dir."""
    from prometheus_client.multiprocess import MultiProcessCollector

    out = {}
    for f in metrics_dir.glob("counter_*.db"):
        pid = int(f.stem.split("_")[1])
        n = 0.0
        for fam in MultiProcessCollector.merge([str(f)], accumulate=True):
            for s in fam.samples:
                if s.name == "jsprof_uploads_accepted_total":
                    n += s.value
        out[pid] = n
    return out


def _post_many(col: Collector, bodies: list[tuple[str, bytes]]) -> list[int]:
    """POST each (query, body) from 8 threads at once; the statuses in order."""
    statuses = [0] * len(bodies)

    def run(k: int) -> None:
        for i in range(k, len(bodies), 8):
            q, b = bodies[i]
            statuses[i] = col.request("POST", f"/v1/traces?{q}", b, JSON)[0]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def test_metrics_add_up_every_workers_uploads(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    col = Collector(tmp_path / "st", "--app", "shop:k1", "--app", "blog:k2", "--workers", "2",
                    "--compact-every", "0", env={"TMPDIR": str(tmp)})
    try:
        _worker_pids(col, 2)
        (mdir,) = tmp.glob("jsprof-serve-metrics-*")
        body = fixture_bytes()
        sent = {"shop": 0, "blog": 0}
        nbytes = 0
        # Batches of concurrent uploads until both workers have stored some (the kernel
        # hands each connection to whichever worker accepts first).
        for _ in range(40):
            todo = [(f"app={a}&key={k}", body)
                    for a, k in (("shop", "k1"), ("blog", "k2")) for _ in range(6)]
            assert set(_post_many(col, todo)) == {202}
            sent["shop"] += 6
            sent["blog"] += 6
            nbytes += len(body) * len(todo)
            per = _accepted_per_worker(mdir)
            if len([n for n in per.values() if n > 0]) >= 2:
                break
        per = _accepted_per_worker(mdir)
        assert len([n for n in per.values() if n > 0]) == 2, per
        # Whichever worker answers the scrape, it counts all of them.
        for _ in range(6):
            m = scrape(col)
            assert value(m, "jsprof_uploads_accepted_total", app="shop") == sent["shop"]
            assert value(m, "jsprof_uploads_accepted_total", app="blog") == sent["blog"]
            assert value(m, "jsprof_upload_received_bytes_total") == nbytes
            assert value(m, "jsprof_upload_ack_seconds_count") == sum(sent.values())
            assert value(m, "jsprof_upload_ack_seconds_bucket", le="+Inf") == sum(sent.values())
            assert sum(per.values()) == sum(sent.values())
        assert value(m, "jsprof_compactor_enabled") == 0
        assert value(m, "jsprof_compactor_pending_uploads") == sum(sent.values())
        assert value(m, "jsprof_store_files", dir="segments") >= 2  # one per worker at least
        assert value(m, "jsprof_store_bytes", dir="segments") > 0
    finally:
        col.stop()
    assert not list(tmp.glob("jsprof-serve-metrics-*"))  # removed when the collector stops


def test_refusals_counted_by_reason(tmp_path: Path) -> None:
    col = Collector(tmp_path / "st", "--app", "shop:k1", "--workers", "2", "--max-body",
                    "64KiB", "--compact-every", "0")
    try:
        body = fixture_bytes()
        other = orjson.dumps({**orjson.loads(body), "samples": []})
        big = b" " * (80 << 10)
        cases = [
            ("app=shop&key=nope", body, 401),  # wrong key
            ("app=nobody&key=k1", body, 401),  # unknown app
            ("key=k1", body, 400),  # no app
            ("app=shop&key=k1", b"{not json", 400),
            ("app=shop&key=k1", b"[]", 400),
            ("app=shop&key=k1", big, 413),
            ("app=shop&key=k1&id=one", body, 202),
            ("app=shop&key=k1&id=one", body, 202),  # a retry: the same upload
            ("app=shop&key=k1&id=one", other, 409),  # another trace under that id
        ]
        read = 0
        for q, b, want in cases:
            status, _, got = col.request("POST", f"/v1/traces?{q}", b, JSON)
            assert status == want, (q, got)
            # Bodies the collector reads: those past the checks of the query and headers.
            if "app=shop&key=k1" in q and want != 413:
                read += len(b)
        status, _, _ = col.request("POST", "/v1/traces?app=shop&key=k1", body,
                                   {"Content-Type": "image/png"})
        assert status == 415
        m = scrape(col)
        assert value(m, "jsprof_uploads_refused_total", reason="unauthorized") == 2
        assert value(m, "jsprof_uploads_refused_total", reason="invalid") == 3
        assert value(m, "jsprof_uploads_refused_total", reason="too_large") == 1
        assert value(m, "jsprof_uploads_refused_total", reason="id_conflict") == 1
        assert value(m, "jsprof_uploads_refused_total", reason="unsupported_media_type") == 1
        assert value(m, "jsprof_uploads_accepted_total", app="shop") == 1
        assert value(m, "jsprof_uploads_duplicate_total", app="shop") == 1
        assert value(m, "jsprof_upload_ack_seconds_count") == 2
        assert value(m, "jsprof_upload_received_bytes_total") == read
    finally:
        col.stop()


def test_who_may_read_metrics_and_probes(tmp_path: Path) -> None:
    col = Collector(tmp_path / "st", "--app", "shop:k1", "--compact-every", "0",
                    env={"JSPROF_METRICS_TOKEN": METRICS_TOKEN})
    try:
        status, _, got = col.request("POST", "/v1/traces?app=shop&key=k1&id=a",
                                     fixture_bytes(), JSON)
        assert status == 202
        assert col.request("GET", "/metrics")[0] == 401
        assert col.request("GET", "/metrics", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert value(scrape(col, METRICS_TOKEN), "jsprof_uploads_accepted_total", app="shop") == 1
        assert value(scrape(col, READ_TOKEN), "jsprof_uploads_accepted_total", app="shop") == 1
        # The metrics token reads nothing else.
        assert col.get("a", token=METRICS_TOKEN)[0] == 401
        # Probes need no token, and say nothing of the store but fixed words.
        status, _, got = col.request("GET", "/healthz")
        assert (status, orjson.loads(got)) == (200, {"status": "ok"})
        status, _, got = col.request("GET", "/readyz")
        assert (status, orjson.loads(got)) == (200, {"status": "ready", "checks": {"store": "ok"}})
    finally:
        col.stop()


def _wait(what: str, cond, timeout: float = 120.0):  # noqa: ANN001 - a test helper
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def _check(store: Path) -> tuple[int, str]:
    r = subprocess.run([str(JSPROF), "serve", "check", "--store", str(store)],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def test_failing_compactor_shows_in_readyz_metrics_log_and_check(tmp_path: Path) -> None:
    store = tmp_path / "st"
    col = Collector(store, "--app", "shop:k1", "--workers", "2", "--compact-every", "0.5")
    try:
        body = fixture_bytes()
        for i in range(3):
            assert col.request("POST", f"/v1/traces?app=shop&key=k1&id=a{i}", body, JSON)[0] == 202
        manifest = store / "tables" / "_manifest.json"
        # the compactor's run report comes a moment after its manifest: a scrape between
        # the two saw pending 0 and runs 0 (beside another test run)
        _wait("the first compaction's report", lambda: manifest.is_file() and (
            lambda m: value(m, "jsprof_compactor_pending_uploads") == 0
            and value(m, "jsprof_compactor_runs_total") >= 1)(scrape(col)))
        m = scrape(col)
        assert value(m, "jsprof_compactor_runs_total") >= 1
        assert value(m, "jsprof_compactor_failures_total") == 0
        assert value(m, "jsprof_store_table_parts") >= 1
        # New parts of the uploads table cannot be written: every run fails (root ignores
        # file modes, so a file takes the folder's place).
        folder = store / "tables" / "uploads"
        kept = tmp_path / "uploads"
        shutil.move(folder, kept)
        folder.write_bytes(b"")
        for i in range(2):
            assert col.request("POST", f"/v1/traces?app=shop&key=k1&id=b{i}", body, JSON)[0] == 202

        def not_ready() -> dict | None:
            status, _, got = col.request("GET", "/readyz")
            return orjson.loads(got) if status == 503 else None

        doc = _wait("readyz to say not ready", not_ready)
        assert doc["checks"]["compactor"].startswith("failing ("), doc
        assert doc["checks"]["store"] == "ok"
        assert str(store) not in doc["error"]  # fixed words only, no paths
        m = scrape(col)
        assert value(m, "jsprof_compactor_consecutive_failures") >= 3
        assert value(m, "jsprof_compactor_failures_total") >= 3
        assert value(m, "jsprof_compactor_pending_uploads") == 2
        assert value(m, "jsprof_compactor_lag_seconds") > 0
        log = "".join(col.stderr_lines)
        assert "compaction failed (1 run in a row)" in log, log
        assert "compaction failing (3 runs in a row)" in log, log
        assert "tables/uploads" in log  # the error itself
        code, out = _check(store)
        assert code == 1, out
        assert "compactor: 2 uploads not yet compacted" in out, out
        assert "compactor: failing" in out, out
        # Mended: the next run compacts the backlog and readyz is ready again.
        folder.unlink()
        shutil.move(kept, folder)
        _wait("readyz to be ready again", lambda: col.request("GET", "/readyz")[0] == 200)
        m = scrape(col)
        assert value(m, "jsprof_compactor_consecutive_failures") == 0
        assert value(m, "jsprof_compactor_pending_uploads") == 0
        _wait("the log to say so", lambda: "compaction works again" in "".join(col.stderr_lines))
    finally:
        col.stop()
    code, out = _check(store)
    assert code == 0, out
    assert "compactor: caught up" in out, out


def test_readyz_says_a_full_store_is_not_ready(tmp_path: Path) -> None:
    """The store on a 4 MiB tmpfs (its own mount namespace, as test_serve_robust's full
    disk) that fills up: readyz 503 "disk full", ready again once space is freed."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    setup = f'mount -t tmpfs -o size=4m tmpfs {shlex.quote(str(mnt))} && exec "$@"'
    col = Collector(mnt / "st", "--app", "shop:k1", "--compact-every", "0",
                    wrap=["unshare", "--mount", "--map-root-user", "sh", "-c", setup, "sh"])
    try:
        assert col.request("GET", "/readyz")[0] == 200
        ballast = Path(f"/proc/{col.proc.pid}/root{mnt}/ballast")
        with open(ballast, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        status, _, got = col.request("GET", "/readyz")
        assert status == 503, got
        assert orjson.loads(got)["checks"]["store"] == "not writable (disk full)"
        assert col.request("GET", "/healthz")[0] == 200  # alive all the same
        ballast.unlink()
        assert col.request("GET", "/readyz")[0] == 200
    finally:
        col.stop()


@pytest.mark.chromium
def test_dashboard_shows_the_compactor_lag(tmp_path: Path) -> None:
    """A collector that does not compact: the dashboard says how many uploads the tables do
    not hold yet (and that it does not compact); /v1/status says the same, with the read
    token only."""
    from playwright.sync_api import expect

    from browser_util import playwright_chromium

    col = Collector(tmp_path / "st", "--app", "shop:k1", "--compact-every", "0")
    try:
        for i in range(3):
            assert col.request("POST", f"/v1/traces?app=shop&key=k1&id=a{i}",
                               fixture_bytes(), JSON)[0] == 202
        assert col.request("GET", "/v1/status")[0] == 401
        status, _, got = col.request("GET", "/v1/status",
                                     headers={"Authorization": f"Bearer {READ_TOKEN}"})
        doc = orjson.loads(got)
        assert status == 200 and doc["compactor"]["pending"] == 3, doc
        assert doc["compactor"]["enabled"] is False and doc["store"]["files"] > 0
        with playwright_chromium() as browser:
            page = browser.new_page()
            signed_in(page, col.url)
            line = page.locator("#compactor")
            expect(line).to_have_attribute("data-pending", "3", timeout=60000)
            text = line.text_content()
            assert text.startswith("Compactor: 3 uploads not yet in the tables"), text
            assert "does not compact (--compact-every 0)" in text
    finally:
        col.stop()


def _compactor_pid(store: Path) -> int | None:
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"jsprof.store.background" in cmd and str(store).encode() in cmd:
            return int(p.name)
    return None


def test_a_compactor_process_that_keeps_dying_says_so(tmp_path: Path) -> None:
    """Killed three times: each death is a log line with how it died, a failed run in the
    store's report and the metrics; it is restarted each time, backing off from
    --compactor-restart (0.25 s here: 0.5 + 1 + 2 s of waits, not the default's 4 + 8 + 16)."""
    import signal

    store = tmp_path / "st"
    col = Collector(store, "--app", "shop:k1", "--compact-every", "0.5",
                    "--compactor-restart", "0.25")
    try:
        assert col.request("POST", "/v1/traces?app=shop&key=k1&id=a", fixture_bytes(),
                           JSON)[0] == 202
        killed = []
        for _ in range(3):
            pid = _wait("a compactor process", lambda: (
                p if (p := _compactor_pid(store)) not in (None, *killed) else None), 120)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        _wait("the third death logged", lambda: "".join(col.stderr_lines).count(
            "the compactor process exited (signal SIGKILL); restarting it") >= 3, 60)
        log = "".join(col.stderr_lines)
        for wait in ("0.5", "1", "2"):  # doubled for each death in a row
            assert f"restarting it in {wait} s" in log, log
        m = scrape(col)
        assert value(m, "jsprof_compactor_failures_total") >= 3
        # It comes back: a fourth process, and runs that succeed again.
        _wait("a compactor again", lambda: _compactor_pid(store) not in (None, *killed), 120)
        _wait("a run that succeeds", lambda: value(
            scrape(col), "jsprof_compactor_consecutive_failures") == 0, 120)
    finally:
        col.stop()
