"""`fleet flame --url` and `fleet export --url` say what the local path says of damaged
records: their answers are a page and a file, so the counts travel in headers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from fleet_util import damage_a_body, make_trace, upload
from jsprof.cli import main
from jsprof.store import Store
from serve_util import READ_TOKEN, Collector

T0 = 1.7e12


def _notes(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("jsprof: note:")]


def test_flame_and_export_over_url_print_the_damaged_records_note(
    tmp_path: Path, capsys, monkeypatch,  # noqa: ANN001
) -> None:
    path = tmp_path / "st"
    st = Store(path)
    rng = np.random.default_rng(8)
    for i in range(6):
        upload(st, f"u{i}", make_trace(rng, 200), app="shop", release="1.0",
               receivedAt=T0 + i * 60e3)
    st.close()
    damage_a_body(path)  # the third upload's checksum fails

    col = Collector(path, "--app", "shop:k1", "--compact-every", "0")
    try:
        auth = {"Authorization": f"Bearer {READ_TOKEN}"}
        for route in ("flame?app=shop&format=svg", "export?app=shop"):
            status, headers, _ = col.request("GET", f"/v1/query/{route}", headers=auth,
                                             timeout=300)
            assert status == 200
            assert headers["x-jsprof-damaged-records"] == "1", headers
            assert headers["x-jsprof-pending-uploads"] == "0"
        monkeypatch.setenv("JSPROF_READ_TOKEN", READ_TOKEN)
        capsys.readouterr()
        remote, local = [], []
        for cmd, out in (("flame", "f.svg"), ("export", "e.jsprof.json")):
            assert main(["fleet", cmd, "--url", col.url, "--app", "shop",
                         "-o", str(tmp_path / f"url-{out}")]) == 0
            remote.append(_notes(capsys.readouterr().err))
            assert main(["fleet", cmd, "--store", str(path), "--app", "shop",
                         "-o", str(tmp_path / f"local-{out}")]) == 0
            local.append(_notes(capsys.readouterr().err))
        # The same sentence, but for where the store is (the client does not know its path).
        for r, lo in zip(remote, local, strict=True):
            assert len(r) == len(lo) == 1, (r, lo)
            assert r[0] == lo[0].replace(f"the store {path}", "the collector's store").replace(
                f"--store {path}", "--store PATH")
            assert r[0].startswith("jsprof: note: 1 damaged record in the collector's store")
    finally:
        col.stop()


class _Hostile:
    """A loopback HTTP server that answers every GET with `body` and `headers`: what a
    collector that is not ours (or a proxy in between) may send `fleet ... --url`."""

    def __init__(self, body: bytes, headers: dict[str, str], ctype: str,
                 status: int = 200) -> None:
        import http.server
        import threading

        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(outer.body)))
                for k, v in outer.headers.items():
                    self.send_header(k, v)  # latin-1 on the wire, as http.server writes it
                self.end_headers()
                self.wfile.write(outer.body)

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.do_GET()

            def log_message(self, *a: object) -> None:
                pass

        self.body, self.headers = body, headers
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def test_hostile_note_values_are_no_traceback_and_no_terminal_text(
    tmp_path: Path, capsys, monkeypatch,  # noqa: ANN001
) -> None:
    """The counts come from the server: a header of Unicode digits (str.isdigit says yes,
    int() says no), a JSON count that is a string of terminal escapes or a list, a huge
    number. Each is no count (0, no note), never a traceback nor text on the terminal."""
    path = tmp_path / "st"
    st = Store(path)
    rng = np.random.default_rng(3)
    for i in range(3):
        upload(st, f"u{i}", make_trace(rng, 100), app="shop", release="1.0",
               receivedAt=T0 + i * 60e3)
    st.close()
    col = Collector(path, "--app", "shop:k1", "--compact-every", "0")
    try:
        auth = {"Authorization": f"Bearer {READ_TOKEN}"}
        status, _, body = col.request("GET", "/v1/query/top?app=shop&format=json",
                                      headers=auth, timeout=300)
        assert status == 200
    finally:
        col.stop()
    import orjson

    doc = orjson.loads(body)
    monkeypatch.setenv("JSPROF_READ_TOKEN", READ_TOKEN)
    for damaged, pending in (("\x1b]0;owned\x07", [1]), (2**63 - 1, -1), (True, 2.5)):
        srv = _Hostile(orjson.dumps(dict(doc, damagedRecords=damaged, pendingUploads=pending)),
                       {}, "application/json")
        try:
            capsys.readouterr()
            assert main(["fleet", "top", "--url", srv.url, "--app", "shop"]) == 0
            err = capsys.readouterr().err
            assert "\x1b" not in err and "owned" not in err, err
            assert not _notes(err), err
        finally:
            srv.close()
    for value in ("\u00b2", "\u00b9\u00b3", "1" * 40, "-3", "7e3"):
        srv = _Hostile(b"<svg xmlns='http://www.w3.org/2000/svg'/>",
                       {"X-Jsprof-Damaged-Records": value,
                        "X-Jsprof-Pending-Uploads": value}, "image/svg+xml")
        try:
            capsys.readouterr()
            assert main(["fleet", "flame", "--url", srv.url, "--app", "shop",
                         "-o", str(tmp_path / "f.svg")]) == 0, value
            err = capsys.readouterr().err
            assert not _notes(err), (value, err)
        finally:
            srv.close()


def test_a_server_that_is_no_jsprof_serve_is_one_line_exit_2(tmp_path: Path) -> None:
    """Not JSON, JSON that is no object, a header line over http.client's 64 KiB, more
    than 100 headers, an error text with terminal escapes, an answer over the cap: one
    line naming the URL, exit 2, no traceback and nothing the terminal would act on."""
    import sys

    env = dict(os.environ, JSPROF_READ_TOKEN=READ_TOKEN, JSPROF_ADMIN_TOKEN="admin-token")
    jsprof = Path(sys.executable).with_name("jsprof")
    (tmp_path / "app.js.map").write_text('{"version": 3, "sources": [], "mappings": ""}')
    cases = [
        (b"not json", {}, "application/json", 200, "top", "answered no JSON object"),
        (b"[1, 2]", {}, "application/json", 200, "vitals", "answered no JSON object"),
        (b"<svg/>", {"X-Big": "a" * 70_000}, "image/svg+xml", 200, "flame",
         "not an answer of jsprof serve"),
        (b"<svg/>", {f"X-H{i}": "1" for i in range(120)}, "image/svg+xml", 200, "flame",
         "not an answer of jsprof serve"),
        (rb'{"error": "\u001b]0;owned\u0007 broke"}', {}, "application/json", 500, "top",
         "500 \\x1b]0;owned\\x07 broke"),
        (b"not json", {}, "application/json", 200, "sourcemaps", "answered no JSON object"),
        (b"<svg>\xff\xfe</svg>", {}, "image/svg+xml", 200, "flame", "answered no UTF-8 page"),
        # Past the cap on a document: the client stops reading there (it read it all, then
        # said "no JSON object", before the cap).
        (b"[" * ((64 << 20) + 1024), {}, "application/json", 200, "top",
         "answered more than 64 MiB"),
    ]
    for body, headers, ctype, status, cmd, said in cases:
        srv = _Hostile(body, headers, ctype, status)
        try:
            p = _run_fleet(jsprof, cmd, srv.url, tmp_path, env)
        finally:
            srv.close()
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, (cmd, said, p.stderr)
        assert lines[0].startswith(f"jsprof: error: {srv.url}") or lines[0].startswith(
            f"jsprof: error: --url {srv.url}"), lines
        assert said in lines[0] and "\x1b" not in p.stderr, lines

    # A name the server says it stored the map under: printed, so as visible escapes.
    srv = _Hostile(rb'{"stored": "\u001b]0;owned\u0007.map"}', {}, "application/json")
    try:
        p = _run_fleet(jsprof, "sourcemaps", srv.url, tmp_path, env)
    finally:
        srv.close()
    assert p.returncode == 0 and "\x1b" not in p.stderr, p.stderr
    assert "stored \\x1b]0;owned\\x07.map for shop 1.0" in p.stderr, p.stderr


def _run_fleet(jsprof: Path, cmd: str, url: str, tmp_path: Path, env: dict
               ) -> subprocess.CompletedProcess:
    args = {"flame": ["flame", "--app", "shop", "-o", str(tmp_path / "f.svg")],
            "sourcemaps": ["sourcemaps", "upload", "--app", "shop", "--release", "1.0",
                           str(tmp_path / "app.js.map")]}.get(cmd, [cmd, "--app", "shop"])
    return subprocess.run([str(jsprof), "fleet", *args, "--url", url], capture_output=True,
                          text=True, env=env, timeout=120)
