"""The nginx snippet of docs/field.md, taken from the page as written, in a real nginx on
loopback in front of a WSGI app: `nginx -t` accepts it, and it answers as jsprof.field's
middlewares do (the rate over many sessions, sticky sessions, documents only, the app's
own Document-Policy kept), and Chromium reads its Document-Policy beside the app's."""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from browser_util import playwright_chromium
from field_util import Fetcher, sample_cookie, values, wsgi_server

pytestmark = pytest.mark.nginx

NGINX = "/usr/sbin/nginx"
DOC = Path(__file__).resolve().parent.parent / "docs" / "field.md"

CONF = """
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
{http}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{backend};
{location}
        }}
    }}
}}
"""


def _snippet(rate_percent: int) -> tuple[str, str]:
    """The page's two nginx blocks (the http block's, the location's), at this rate."""
    blocks = re.findall(r"```nginx\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2, "docs/field.md should have two nginx blocks"
    http, location = blocks
    assert "    1%      1;" in http  # the rate as the page gives it
    return http.replace("    1%      1;", f"    {rate_percent}%      1;"), location


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nginx_t(conf: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NGINX, "-t", "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")],
        capture_output=True,
        text=True,
        timeout=60,
    )


@contextmanager
def nginx(rate_percent: int) -> Iterator[tuple[str, Path]]:
    """nginx with the page's snippet at `rate_percent`, in front of the WSGI app (no
    middleware); yields (its origin, its config file)."""
    assert os.path.exists(NGINX), f"{NGINX} is missing: run `make nginx`"
    # Not under pytest's tmp_path (mode 0700): nginx's workers run as `nobody` when the
    # tests run as root, and must reach their temp folders.
    tmp = Path(tempfile.mkdtemp(prefix="jsprof-nginx-"))
    tmp.chmod(0o755)
    http, location = _snippet(rate_percent)
    indent = lambda text, n: "".join(" " * n + line + "\n" for line in text.splitlines())  # noqa: E731
    try:
        with wsgi_server(None) as backend:
            port = _free_port()
            conf = tmp / "nginx.conf"
            conf.write_text(
                CONF.format(
                    tmp=tmp,
                    port=port,
                    backend=backend.rsplit(":", 1)[1],
                    http=indent(http, 4),
                    location=indent(location, 12),
                )
            )
            proc = subprocess.Popen(
                [
                    NGINX,
                    "-p",
                    str(tmp),
                    "-c",
                    str(conf),
                    "-e",
                    str(tmp / "error.log"),
                    "-g",
                    "daemon off;",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            try:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=1).close()
                        break
                    except OSError:
                        assert proc.poll() is None, proc.stderr.read().decode()
                        assert time.monotonic() < deadline, "nginx did not listen"
                        time.sleep(0.05)
                yield f"http://127.0.0.1:{port}", conf
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_nginx_t_accepts_the_snippet() -> None:
    with nginx(1) as (_, conf):
        r = _nginx_t(conf, conf.parent)
    assert r.returncode == 0, r.stderr
    assert "syntax is ok" in r.stderr and "test is successful" in r.stderr, r.stderr


def test_nginx_t_refuses_a_broken_snippet() -> None:
    # The check above means something: the same config with one map's brace dropped fails.
    with nginx(1) as (_, conf):
        text = conf.read_text()
        conf.write_text(text.replace("map $https $jsprof_secure {", "map $https $jsprof_secure"))
        r = _nginx_t(conf, conf.parent)
    assert r.returncode != 0 and "emerg" in r.stderr, r.stderr


def test_the_rate_and_what_a_first_page_gets() -> None:
    n, rate = 1000, 0.3
    sampled = 0
    with nginx(30) as (origin, _):
        f = Fetcher(origin)
        for _ in range(n):
            _, lines = f.get("/page")
            cookie = sample_cookie(lines)
            assert cookie in (
                "jsprof_sample=1; Path=/; SameSite=Lax",
                "jsprof_sample=0; Path=/; SameSite=Lax",
            ), lines
            yes = cookie.startswith("jsprof_sample=1")
            assert values(lines, "document-policy") == (["js-profiling"] if yes else []), lines
            assert values(lines, "vary") == ["Cookie"], lines
            sampled += yes
        f.close()
    sd = math.sqrt(n * rate * (1 - rate))  # 14.5: outside 5 sd by chance with p < 1e-6
    assert abs(sampled - n * rate) < 5 * sd, (sampled, n * rate)


def test_sessions_are_sticky_and_only_documents_change() -> None:
    with nginx(50) as (origin, _):
        f = Fetcher(origin)
        for _ in range(20):  # a session that has the cookie keeps it, whatever the draw
            for cookie, want in (("jsprof_sample=1", ["js-profiling"]), ("jsprof_sample=0", [])):
                _, lines = f.get("/page", cookie=f"theme=dark; {cookie}")
                assert values(lines, "document-policy") == want, lines
                assert sample_cookie(lines) is None, lines
        # Not a document: nothing added, whatever the session.
        for cookie in (None, "jsprof_sample=1"):
            _, lines = f.get("/api", cookie=cookie)
            assert values(lines, "document-policy") == [] and sample_cookie(lines) is None
            assert values(lines, "vary") == [], lines
        # The app's own headers stay; nginx's lines go beside them.
        _, lines = f.get("/own-headers", cookie="jsprof_sample=1")
        assert values(lines, "document-policy") == ["force-load-at-top", "js-profiling"]
        assert values(lines, "vary") == ["Accept-Encoding", "Cookie"], lines
        assert values(lines, "set-cookie") == ["theme=dark; Path=/"], lines
        f.close()


@pytest.mark.chromium
def test_chromium_reads_both_document_policy_lines() -> None:


    probe = """() => { try { new Profiler({sampleInterval: 10, maxBufferSize: 10}); return "ok"; }
                       catch (e) { return e.name; } }"""
    with nginx(100) as (origin, _), playwright_chromium() as b:
        got = {}
        for cookie in ("1", "0"):
            context = b.new_context()
            host = origin.split("//")[1].split(":")[0]
            context.add_cookies(
                [{"name": "jsprof_sample", "value": cookie, "domain": host, "path": "/"}]
            )
            page = context.new_page()
            response = page.goto(f"{origin}/own-headers")
            got[cookie] = (response.headers.get("document-policy"), page.evaluate(probe))
            context.close()
    # Playwright joins a header's lines with a newline.
    assert got["1"] == ("force-load-at-top\njs-profiling", "ok"), got
    assert got["0"] == ("force-load-at-top", "NotAllowedError"), got
