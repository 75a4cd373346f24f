"""One page load of a bundled, minified app whose source map went up with `fleet sourcemaps
upload --url`: the page (its `#parse` button clicked four times) in headless Chromium with the
real client, a real `jsprof serve` on loopback, every upload compacted. Shared by the tests
of what the fleet and `report --sourcemap` make of such a map."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from browser_util import HTML, open_page, page_server, playwright_chromium
from serve_util import JSPROF, Collector

ADMIN = "test-admin-token"


def fleet_top(store: Path, *args: str) -> dict:
    r = subprocess.run([str(JSPROF), "fleet", "top", "--store", str(store), "--app", "shop",
                        "--json", "--top", "100000", *args],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    return orjson.loads(r.stdout)


@dataclass
class MappedRun:
    store: Path
    raw: list[dict]  # the uploads as the collector stored them
    top: dict  # `fleet top --json` once every upload was compacted
    script: bytes  # the minified script the page ran
    merged: Path | None  # `fleet export` of the store, when asked


def run_mapped_app(tmp_path: Path, dist: Path, page_html: str, release: str,
                   export: bool = False) -> MappedRun:
    """`page_html` has `%(collector)s` for the collector's URL and loads
    /static/app.min.js, which is `dist`/app.min.js (its map beside it)."""
    script = (dist / "app.min.js").read_bytes()
    collector: list[str] = []

    def respond(path: str) -> tuple[bytes, str, dict]:
        if path.startswith("/static/app.min.js"):
            return script, "text/javascript", {}
        return (page_html % {"collector": collector[0]}).encode(), HTML, {
            "Document-Policy": "js-profiling"}

    store = tmp_path / "store"
    merged = None
    with page_server(respond) as origin:
        col = Collector(store, "--app", "shop:k1", "--allow-origin", f"shop={origin}",
                        "--compact-every", "1", env={"JSPROF_ADMIN_TOKEN": ADMIN})
        collector.append(col.url)
        try:
            up = subprocess.run(
                [str(JSPROF), "fleet", "sourcemaps", "upload", "--url", col.url, "--app",
                 "shop", "--release", release, str(dist)],
                capture_output=True, text=True, timeout=120,
                env={**os.environ, "JSPROF_ADMIN_TOKEN": ADMIN})
            assert up.returncode == 0, up.stderr
            # every source and the script are beside the map: nothing to warn of
            assert "warning" not in up.stderr, up.stderr
            with playwright_chromium() as b:
                page = open_page(b, f"{origin}/", profiled=True, timeout_ms=60000)
                for _ in range(4):
                    page.click("#parse")
                    page.wait_for_timeout(150)
                ids = page.evaluate("profiler.stop()")
                page.close()
            raw = [orjson.loads(x) for x in col.wait_stored(*ids, timeout=60)]
            deadline = time.monotonic() + 120
            while (top := fleet_top(store))["pendingUploads"]:
                assert time.monotonic() < deadline, "uploads never compacted"
                time.sleep(0.5)
            if export:
                merged = tmp_path / "merged.jsprof.json"
                ex = subprocess.run([str(JSPROF), "fleet", "export", "--store", str(store),
                                     "--app", "shop", "-o", str(merged)],
                                    capture_output=True, text=True, timeout=180)
                assert ex.returncode == 0, ex.stderr
        finally:
            col.stop()
    return MappedRun(store, raw, top, script, merged)


def report_rows(tmp_path: Path, raw: list[dict], dist: Path) -> list[dict]:
    """`jsprof report --sourcemap DIST --json` of each upload, their rows together."""
    rows: list[dict] = []
    for n, one in enumerate(raw):
        f = tmp_path / f"upload{n}.jsprof.json"
        f.write_bytes(orjson.dumps(one))
        r = subprocess.run([str(JSPROF), "report", str(f), "--sourcemap", str(dist), "--json",
                            "--top", "100000"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        got = orjson.loads(r.stdout)
        rows += got["rows"] if isinstance(got, dict) else got
    return rows
