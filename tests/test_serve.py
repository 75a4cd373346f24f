"""`jsprof serve` on loopback: the contract of issue 13, request by request, on a real server."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import orjson
import pytest

from jsprof.store import Store
from serve_util import JSPROF, READ_TOKEN, Collector, field_trace, fixture_bytes, gz


@pytest.fixture(scope="module")
def col(tmp_path_factory: pytest.TempPathFactory) -> Collector:
    store = tmp_path_factory.mktemp("serve") / "store"
    c = Collector(
        store,
        "--app",
        "shop:k1",
        "--app",
        "blog:k2",
        "--allow-origin",
        "shop=https://shop.example",
        "--max-samples",
        "20000",
    )
    yield c
    c.stop()


def _one_line_error(status: int, headers: dict, body: bytes) -> str:
    assert 400 <= status < 500, (status, body)
    assert headers["content-type"] == "application/json"
    doc = orjson.loads(body)
    assert list(doc) == ["error"] and isinstance(doc["error"], str)
    assert doc["error"] and "\n" not in doc["error"]
    return doc["error"]


def test_first_line_and_token_file(tmp_path: Path) -> None:
    c = Collector(tmp_path / "st", "--app", "shop:k1", read_token=None)
    try:
        assert c.first_line == f"jsprof serve: listening on http://127.0.0.1:{c.port}\n"
        token_file = tmp_path / "st" / "read-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        status, data = c.get("x", token)
        assert status == 404  # the generated token works
        assert c.get("x", token + "x")[0] == 401
    finally:
        took = c.stop()
    assert c.proc.returncode == 0 and took < 10
    assert c.proc.stdout.read() == b""  # nothing on stdout but the first line
    # where the generated token is, never the token (stderr goes to logs)
    assert not any(token in line for line in c.stderr_lines), c.stderr_lines
    assert any(str(token_file) in line for line in c.stderr_lines), c.stderr_lines
    # A restart keeps the token; JSPROF_READ_TOKEN overrides it.
    env = {**os.environ, "JSPROF_READ_TOKEN": "from-env"}
    p = subprocess.Popen(
        [str(JSPROF), "serve", "--store", str(tmp_path / "st"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        line = p.stdout.readline().decode()
        port = int(line.rsplit(":", 1)[1])
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/v1/traces/x", headers={"Authorization": "Bearer from-env"})
        assert conn.getresponse().status == 404
    finally:
        p.terminate()
        _, err = p.communicate(timeout=10)
    assert token not in err.decode()
    assert token_file.read_text().strip() == token


def test_upload_forms_and_read_back(col: Collector) -> None:
    raw = fixture_bytes()
    doc = orjson.loads(raw)
    assert any("?" in r for r in doc["resources"])
    forms = {
        "plain": (raw, "application/json", None),
        "gzip": (gz(raw), "application/json", "gzip"),
        "deflate": (zlib.compress(raw), "text/plain;charset=UTF-8", "deflate"),
        "beacon": (raw, "text/plain", None),
        "beacon-gz": (gz(raw), "text/plain", None),  # sendBeacon cannot say Content-Encoding
    }
    for name, (body, ctype, enc) in forms.items():
        q = f"app=shop&key=k1&release=r1&route=/cart?x=1&env=prod&id=form-{name}"
        status, answer = col.post(body, q, ctype, enc)
        assert (status, answer) == (202, {"id": f"form-{name}"}), name
        status, data = col.get(f"form-{name}")
        assert status == 200
        got = orjson.loads(data)
        # Samples, frames and stacks exactly as uploaded; only the URLs lost their queries.
        assert got["samples"] == doc["samples"] and got["stacks"] == doc["stacks"]
        assert got["frames"] == doc["frames"]
        assert got["resources"] == [r.split("?")[0] for r in doc["resources"]]
        meta = got["jsprof"]["meta"]
        assert meta["app"] == "shop" and meta["release"] == "r1" and meta["env"] == "prod"
        assert meta["route"] == "/cart"
        assert abs(meta["receivedAt"] - time.time() * 1000) < 60_000
        assert "127.0.0.1" not in orjson.dumps(meta).decode()  # no client address
    # The header form of the key.
    status, answer = col.post(raw, "app=shop", headers={"X-Jsprof-Key": "k1"})
    assert status == 202 and len(answer["id"]) == 36


def test_envelope_meta_and_jsprof_report(col: Collector, tmp_path: Path) -> None:
    trace = orjson.loads(fixture_bytes())
    env = {
        "trace": trace,
        "meta": {
            "timeOrigin": 1700000000123.25,
            "userAgent": "UA/1",
            "sampleInterval": 10,
            "app": "evil",
            "receivedAt": 1,
            "build": "abc",
        },
    }
    status, answer = col.post(gz(orjson.dumps(env)), "app=shop&key=k1&id=env-1", encoding="gzip")
    assert status == 202
    status, data = col.get("env-1")
    got = orjson.loads(data)
    ext = got["jsprof"]
    assert ext["timeOrigin"] == 1700000000123.25 and ext["sampleInterval"] == 10
    meta = ext["meta"]
    assert meta["app"] == "shop" and meta["receivedAt"] > 1  # server keys win
    assert meta["userAgent"] == "UA/1" and meta["build"] == "abc"
    out = tmp_path / "env-1.json"
    out.write_bytes(data)
    r = subprocess.run(
        [str(JSPROF), "report", str(out), "--top", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "busyLoop" in r.stdout and "fib" in r.stdout


def test_timestamps_bit_for_bit_and_resources_merged(col: Collector) -> None:
    doc = {
        "resources": [
            "https://a.example/app.js?v=1",
            "https://a.example/app.js?v=2#x",
            "https://a.example/b.js",
        ],
        "frames": [
            {"name": "f", "resourceId": 0, "line": 1, "column": 1},
            {"name": "g", "resourceId": 1, "line": 2, "column": 1},
            {"name": "h", "resourceId": 2},
        ],
        "stacks": [{"frameId": 0}, {"frameId": 1, "parentId": 0}, {"frameId": 2}],
        "samples": [
            {"timestamp": 0.1 + 0.2},
            {"timestamp": 1e-300, "stackId": 1},
            {"timestamp": 123456.78901234567, "stackId": 2},
            {"timestamp": 5e15 + 0.5, "stackId": 0},
        ],
    }
    col.post(orjson.dumps(doc), "app=shop&key=k1&id=bits")
    got = orjson.loads(col.get("bits")[1])
    assert got["resources"] == ["https://a.example/app.js", "https://a.example/b.js"]
    assert [f["resourceId"] for f in got["frames"]] == [0, 0, 1]
    assert [s["timestamp"] for s in got["samples"]] == [s["timestamp"] for s in doc["samples"]]
    assert got["stacks"] == doc["stacks"]


def test_keep_query(tmp_path: Path) -> None:
    c = Collector(tmp_path / "st", "--app", "shop:k1", "--keep-query")
    try:
        raw = fixture_bytes()
        assert c.post(raw, "app=shop&key=k1&id=q")[0] == 202
        got = orjson.loads(c.get("q")[1])
        assert got["resources"] == orjson.loads(raw)["resources"]
    finally:
        took = c.stop(signal.SIGINT)  # ctrl-c: the same graceful stop as SIGTERM
    assert c.proc.returncode == 0 and took < 10


def test_idempotent_ids(col: Collector) -> None:
    raw = fixture_bytes("trace-idle.json")
    results = []

    def send() -> None:
        results.append(col.post(raw, "app=blog&key=k2&id=same-id"))

    ts = [threading.Thread(target=send) for _ in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert results == [(202, {"id": "same-id"})] * 8
    st = Store(col_store(col))
    assert sum(u == "same-id" for _, u, _, _ in st.iter_uploads()) == 1
    # Another trace under a stored id is a conflict, not silently dropped; the stored one
    # stays, and a retry of the first (gzipped this time) is still answered as before.
    status, doc = col.post(fixture_bytes("trace-basic.json"), "app=blog&key=k2&id=same-id")
    assert status == 409 and "same-id" in doc["error"], doc
    assert orjson.loads(col.get("same-id")[1])["samples"] == orjson.loads(raw)["samples"]
    assert col.post(gz(raw), "app=blog&key=k2&id=same-id", encoding="gzip")[0] == 202


def col_store(col: Collector) -> Path:
    args = col.proc.args
    return Path(args[args.index("--store") + 1])


def test_refusals_are_one_line_json(col: Collector) -> None:
    raw = fixture_bytes()
    cases = [
        (400, col.post(raw, "key=k1")),
        (401, col.post(raw, "app=nope&key=k1")),
        (401, col.post(raw, "app=shop&key=wrong")),
        (401, col.post(raw, "app=shop")),
        (400, col.post(raw, "app=shop&key=k1&id=bad/id")),
        (415, col.post(raw, ctype="application/xml")),
        (415, col.post(raw, ctype="")),
        (415, col.post(raw, encoding="br")),
        (400, col.post(b"", ctype="application/json")),
        (400, col.post(b"{not json")),
        (400, col.post(b"[1,2]")),
        (400, col.post(gz(raw)[:-20], encoding="gzip")),
        (400, col.post(b"garbage", encoding="gzip")),
        (400, col.post(fixture_bytes().replace(b'"frames"', b'"framez"'))),
        (400, col.post(orjson.dumps({"trace": [], "meta": {}}))),
        (400, col.post(orjson.dumps({"trace": orjson.loads(raw), "meta": {"timeOrigin": "x"}}))),
        (
            400,
            col.post(
                (Path(__file__).parent / "data/node").glob("*.cpuprofile").__next__().read_bytes()
            ),
        ),
    ]
    for want, (status, doc) in cases:
        assert status == want, (want, status, doc)
        assert list(doc) == ["error"] and "\n" not in doc["error"], doc
    # The reader names field and index.
    bad = orjson.loads(raw)
    bad["stacks"][3]["frameId"] = 999
    status, doc = col.post(orjson.dumps(bad))
    assert status == 400 and "stacks[3].frameId" in doc["error"], doc
    # GET: token and id.
    for token in (None, "wrong", READ_TOKEN[:-1], READ_TOKEN + "x"):
        status, h, body = col.request(
            "GET",
            "/v1/traces/form-plain",
            headers={"Authorization": f"Bearer {token}"} if token else {},
        )
        assert "token" in _one_line_error(status, h, body)
    status, h, body = col.request(
        "GET", "/v1/traces/nope", headers={"Authorization": f"Bearer {READ_TOKEN}"}
    )
    assert status == 404 and "nope" in _one_line_error(status, h, body)
    status, h, body = col.request("GET", "/", headers={})
    assert status in (401, 404, 200)  # the dashboard's page when fleet's module is there
    status, h, body = col.request("DELETE", "/v1/traces/x")
    _one_line_error(status, h, body)


def test_limits(tmp_path: Path) -> None:
    c = Collector(
        tmp_path / "st",
        "--app",
        "shop:k1",
        "--max-body",
        "100KiB",
        "--max-decompressed",
        "1MiB",
        "--max-samples",
        "100",
        "--max-depth",
        "5",
    )
    try:
        raw = fixture_bytes()  # 157 samples, stacks up to 6 deep
        assert c.post(raw)[0] == 413  # samples
        doc = orjson.loads(raw)
        doc["samples"] = doc["samples"][:90]
        status, err = c.post(orjson.dumps(doc))
        assert status == 413 and "deep" in err["error"]
        ok = orjson.loads(fixture_bytes("trace-idle.json"))
        assert c.post(orjson.dumps(ok))[0] == 202 or len(ok["samples"]) > 100
        big = b" " * (200 * 1024) + orjson.dumps(ok)
        assert c.post(big)[0] == 413  # over the body limit (Content-Length)
        bomb = gz(b"[" + b" " * (50 << 20) + b"]")  # 50 MiB of nothing in ~50 KiB
        assert len(bomb) < 100 * 1024
        t0 = time.monotonic()
        status, err = c.post(bomb, encoding="gzip")
        assert status == 413 and "decompressed" in err["error"]
        assert time.monotonic() - t0 < 5
        # A chunked body (no Content-Length) over the limit is cut off while streaming.
        import http.client

        conn = http.client.HTTPConnection(c.host, c.port, timeout=30)
        conn.putrequest("POST", "/v1/traces?app=shop&key=k1")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        try:
            for _ in range(30):
                chunk = b" " * 8192
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = conn.getresponse()
        assert r.status == 413 and orjson.loads(r.read())["error"]
    finally:
        c.stop()


def test_rate_limit_per_app(tmp_path: Path) -> None:
    c = Collector(tmp_path / "st", "--app", "shop:k1", "--app", "blog:k2", "--rate-limit", "3/s")
    try:
        raw = fixture_bytes("trace-idle.json")
        codes = [c.post(raw)[0] for _ in range(8)]
        assert codes.count(202) >= 3 and 429 in codes
        assert c.post(raw, "app=blog&key=k2")[0] == 202  # another app has its own budget
        status, h, body = c.request(
            "POST", "/v1/traces?app=shop&key=k1", raw, {"Content-Type": "application/json"}
        )
        if status == 429:
            assert h["retry-after"] and _one_line_error(status, h, body)
        time.sleep(1.2)
        assert c.post(raw)[0] == 202
    finally:
        c.stop()


def test_cors(col: Collector) -> None:
    pre = {
        "Origin": "https://shop.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, content-encoding",
    }
    status, h, _ = col.request("OPTIONS", "/v1/traces?app=shop&key=k1&id=z", headers=pre)
    assert status == 204
    assert h["access-control-allow-origin"] == "https://shop.example"
    assert "POST" in h["access-control-allow-methods"]
    assert "content-encoding" in h["access-control-allow-headers"].lower()
    status, h, body = col.request(
        "OPTIONS", "/v1/traces?app=blog", headers={**pre, "Origin": "https://shop.example"}
    )
    assert "access-control-allow-origin" not in h
    _one_line_error(status, h, body)
    status, h, _ = col.request(
        "POST",
        "/v1/traces?app=shop&key=k1",
        fixture_bytes("trace-idle.json"),
        {"Content-Type": "application/json", "Origin": "https://shop.example"},
    )
    assert status == 202 and h["access-control-allow-origin"] == "https://shop.example"
    status, h, _ = col.request(
        "POST",
        "/v1/traces?app=shop&key=bad",
        b"{}",
        {"Content-Type": "application/json", "Origin": "https://shop.example"},
    )
    assert status == 401 and h["access-control-allow-origin"] == "https://shop.example"
    # A page of an origin that may not upload for the app is refused before anything is
    # read, however it posts: the client's text/plain bodies need no preflight, so the
    # browser does not stop them (issue 33).
    for ctype in ("application/json", "text/plain"):
        status, h, body = col.request(
            "POST", "/v1/traces?app=shop&key=k1&id=evil-" + ctype.replace("/", "-"),
            fixture_bytes("trace-idle.json"), {"Content-Type": ctype, "Origin": "https://evil.example"},
        )
        assert status == 403 and "access-control-allow-origin" not in h
        assert "--allow-origin shop=ORIGIN" in _one_line_error(status, h, body)
        assert col.get("evil-" + ctype.replace("/", "-"))[0] == 404
    status, h, body = col.request("GET", "/v1/client.js", headers={"Origin": "https://x.test"})
    assert status == 200 and h["access-control-allow-origin"] == "*"
    assert h["content-type"].startswith("text/javascript")
    assert b"export function startProfiling" in body


def test_access_log_only_when_asked(tmp_path: Path) -> None:
    quiet = Collector(tmp_path / "a", "--app", "shop:k1")
    loud = Collector(tmp_path / "b", "--app", "shop:k1", "--access-log")
    try:
        for c in (quiet, loud):
            c.post(fixture_bytes("trace-idle.json"), "app=shop&key=k1&id=logme")
            c.get("logme")
    finally:
        quiet.stop()
        loud.stop()
    assert not any("/v1/traces" in line for line in quiet.stderr_lines)
    lines = [line for line in loud.stderr_lines if "/v1/traces" in line]
    assert any("POST /v1/traces 202" in line for line in lines)
    assert not any("k1" in line or "127.0.0.1" in line for line in lines)


def test_sigterm_finishes_uploads_in_progress(tmp_path: Path) -> None:
    c = Collector(tmp_path / "st", "--app", "shop:k1")
    body = gz(field_trace(20000))
    acked: list[str] = []
    refused: list[object] = []

    def client(i: int) -> None:
        for j in range(200):
            try:
                status, doc = c.post(body, f"app=shop&key=k1&id=t{i}-{j}", encoding="gzip")
            except OSError as e:
                refused.append(e)
                return
            if status == 202:
                acked.append(doc["id"])

    ts = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    [t.start() for t in ts]
    while len(acked) < 10:
        time.sleep(0.01)
    took = c.stop()
    [t.join() for t in ts]
    assert c.proc.returncode == 0 and took < 10
    assert refused  # new uploads were turned away once it was stopping
    st = Store(tmp_path / "st")
    assert all(st.get(u) is not None for u in acked)


def test_prune_cli(tmp_path: Path) -> None:
    st = Store(tmp_path / "st")
    old = time.time() * 1000 - 40 * 86400e3
    raw = fixture_bytes("trace-idle.json")
    st.append("old-a", {"app": "a", "receivedAt": old}, raw)
    st.append("old-b", {"app": "b", "receivedAt": old}, raw)
    st.append("new-a", {"app": "a", "receivedAt": time.time() * 1000}, raw)
    st.close()
    run = [str(JSPROF), "serve", "prune", "--store", str(tmp_path / "st"), "--older-than"]
    r = subprocess.run([*run, "30d", "--app", "a"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "removed 1 upload," in r.stdout, r.stderr
    r = subprocess.run([*run, "30d"], capture_output=True, text=True, timeout=60)
    assert "removed 1 upload, kept 1" in r.stdout
    st = Store(tmp_path / "st")
    assert [u for _, u, _, _ in st.iter_uploads()] == ["new-a"]
    r = subprocess.run([*run, "soon"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "duration" in r.stderr
    r = subprocess.run(
        [str(JSPROF), "serve", "prune", "--store", str(tmp_path / "nope"), "--older-than", "1d"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "not a jsprof store" in r.stderr


def test_retention_prunes_in_the_collector(tmp_path: Path) -> None:
    st = Store(tmp_path / "st")
    st.append("ancient", {"app": "shop", "receivedAt": 1000.0}, fixture_bytes("trace-idle.json"))
    st.close()
    c = Collector(tmp_path / "st", "--app", "shop:k1", "--retention", "30d")
    try:
        deadline = time.monotonic() + 20
        while c.get("ancient")[0] != 404 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.get("ancient")[0] == 404
    finally:
        c.stop()


def test_bad_flags_are_one_line(tmp_path: Path) -> None:
    for args in (
        ["--app", "shop"],
        ["--app", "a:k", "--allow-origin", "b=https://x"],
        ["--rate-limit", "fast"],
        ["--retention", "forever"],
        ["--app", "a:k", "--allow-origin", "a=shop.example"],
    ):
        r = subprocess.run(
            [str(JSPROF), "serve", "--store", str(tmp_path / "s"), "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2 and r.stdout == "", args
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    busy = Collector(tmp_path / "s2", "--app", "a:k")
    try:
        r = subprocess.run(
            [str(JSPROF), "serve", "--store", str(tmp_path / "s3"), "--port", str(busy.port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2 and "cannot listen" in r.stderr and r.stdout == ""
    finally:
        busy.stop()


def test_cli_help_loads_no_server() -> None:
    code = (
        "import sys, jsprof.cli as c; c.build_parser();"
        "bad=[m for m in ('starlette','uvicorn','zstandard') if m in sys.modules];"
        "print(bad)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_deep_nesting_is_a_400_like_validate(col: Collector, tmp_path: Path) -> None:
    """Issue 20: 100,000 arrays deep answered 500 (RecursionError on the fast path)."""
    n = 100_000
    deep = b"[" * n + b"]" * n
    bodies = [
        b'{"resources":[],"frames":[],"stacks":[],"samples":' + deep + b"}",
        deep,
        b'{"resources":[],"frames":[],"stacks":[],"samples":[{"timestamp":1,"x":' + deep + b"}]}",
        b'{"trace":' + deep + b',"meta":{}}',
    ]
    for body in bodies:
        for enc in (None, "gzip"):
            status, doc = col.post(gz(body) if enc else body, encoding=enc)
            assert status == 400, (body[:60], status, doc)
            assert "nesting deeper than 1024 levels" in doc["error"], doc
            assert list(doc) == ["error"] and "\n" not in doc["error"]
        f = tmp_path / "deep.json"
        f.write_bytes(body)
        r = subprocess.run(
            [str(JSPROF), "validate", str(f)], capture_output=True, text=True, timeout=60
        )
        assert r.returncode != 0 and "nesting deeper than 1024 levels" in r.stderr


def test_sourcemap_content_length_not_a_number_is_400(tmp_path: Path) -> None:
    """Issue 20: a non-numeric Content-Length on the source-map route answered 500. An HTTP
    parser refuses most such headers before the app; the app refuses what reaches it."""
    from jsprof.serve.app import create_app
    from jsprof.serve.config import ServeConfig
    from serve_util import asgi_call

    st = Store(tmp_path / "st")
    try:
        app = create_app(ServeConfig(store=str(tmp_path / "st"), admin_token="adm"), st)
        for length in ("abc", "12abc", "-5", "1e3", "٣"):
            status, h, body = asgi_call(
                app,
                "POST",
                "/v1/sourcemaps?app=a&release=1",
                b"{}",
                {"authorization": "Bearer adm", "content-length": length},
            )
            assert status == 400, (length, status, body)
            assert "Content-Length" in _one_line_error(status, h, body)
    finally:
        st.close()


def test_malformed_http_is_a_json_400(col: Collector) -> None:
    import socket

    for req in (
        b"NOT HTTP AT ALL\r\n\r\n",
        b"POST /v1/traces?app=shop HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    ):
        with socket.create_connection((col.host, col.port), timeout=10) as s:
            s.sendall(req)
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), answer
        assert b"content-type: application/json" in head.lower()
        doc = orjson.loads(body)
        assert list(doc) == ["error"] and "\n" not in doc["error"]


def _signin_form(c: Collector, headers: dict[str, str] | None = None) -> tuple[str, str]:
    """GET / signed out: (the form's CSRF nonce, the cookie header that carries it)."""
    status, h, body = c.request("GET", "/", headers=headers or {})
    assert status == 200 and b"name='csrf'" in body
    nonce = body.split(b"name='csrf' value='")[1].split(b"'")[0].decode()
    cookie = h["set-cookie"].split(";")[0]
    assert cookie == f"jsprof_signin={nonce}"
    return nonce, cookie


def _post_form(
    c: Collector, path: str, fields: dict[str, str], headers: dict[str, str]
) -> tuple[int, dict, bytes]:
    from urllib.parse import urlencode

    h = {"Content-Type": "application/x-www-form-urlencoded", **headers}
    return c.request("POST", path, urlencode(fields).encode(), h)


def _signin(c: Collector, token: str = READ_TOKEN, **extra: str) -> tuple[int, dict]:
    nonce, cookie = _signin_form(c, extra)
    status, h, _ = _post_form(
        c, "/signin", {"csrf": nonce, "token": token}, {"Cookie": cookie, **extra}
    )
    return status, h


def test_signin_sets_a_signed_expiring_session_not_the_token(col: Collector) -> None:
    from jsprof.serve.auth import SESSION_S, new_session

    status, h = _signin(col, Origin=f"http://{col.host}:{col.port}")
    assert status == 303
    set_cookie = h["set-cookie"]
    assert set_cookie.startswith("jsprof_session=") and READ_TOKEN not in set_cookie
    attrs = [a.strip().lower() for a in set_cookie.split(";")]
    assert "httponly" in attrs and "samesite=strict" in attrs and "secure" not in attrs
    assert f"max-age={SESSION_S}" in attrs
    session = set_cookie.split(";")[0]
    assert col.request("GET", "/v1/traces/nope", headers={"Cookie": session})[0] == 404
    # Tampered, forged with another key, expired: not signed in.
    value = session.split("=", 1)[1]
    expired = new_session(READ_TOKEN, now=time.time() - SESSION_S - 1)
    for bad in (value[:-2] + ("AA" if value[-2:] != "AA" else "BB"), new_session("other"), expired):
        status, _, _ = col.request(
            "GET", "/v1/traces/nope", headers={"Cookie": f"jsprof_session={bad}"}
        )
        assert status == 401, bad
    # Bad cookies are not guesses to throttle (a MAC cannot be guessed): an old session
    # never locks its user out of the sign-in page.
    for _ in range(15):
        status, _, page = col.request("GET", "/", headers={"Cookie": f"jsprof_session={expired}"})
        assert status == 200 and b"name='token'" in page
    # The page signed in carries the sign-out form's CSRF token; sign-out needs it.
    status, _, page = col.request("GET", "/", headers={"Cookie": session})
    assert status == 200 and b"{{csrf}}" not in page
    csrf = page.split(b'name="csrf" value="')[1].split(b'"')[0].decode()
    assert len(csrf) > 20
    for fields, extra in (
        ({}, {}),  # no token
        ({"csrf": "x" * len(csrf)}, {}),  # a wrong one
        ({"csrf": csrf}, {"Sec-Fetch-Site": "cross-site"}),  # a cross-site post
        ({"csrf": csrf}, {"Origin": "https://evil.example"}),
    ):
        status, h, body = _post_form(col, "/signout", fields, {"Cookie": session, **extra})
        assert status == 403 and "cross-site" in _one_line_error(status, h, body)
        assert "set-cookie" not in h
    status, h, _ = _post_form(
        col, "/signout", {"csrf": csrf}, {"Cookie": session, "Sec-Fetch-Site": "same-origin"}
    )
    assert status == 303 and h["set-cookie"].startswith('jsprof_session="";')


def test_signin_refuses_cross_site_posts(col: Collector) -> None:
    nonce, cookie = _signin_form(col)
    good = {"csrf": nonce, "token": READ_TOKEN}
    for fields, headers in (
        (good, {"Cookie": cookie, "Sec-Fetch-Site": "cross-site"}),
        (good, {"Cookie": cookie, "Origin": "https://evil.example"}),
        (good, {"Cookie": cookie, "Origin": "null"}),
        (good, {}),  # login CSRF: the attacker's page cannot send our cookie
        ({"token": READ_TOKEN}, {"Cookie": cookie}),
        ({"csrf": "forged", "token": READ_TOKEN}, {"Cookie": cookie}),
    ):
        status, h, body = _post_form(col, "/signin", fields, headers)
        assert status == 403, (fields, headers)
        assert "set-cookie" not in h or not h["set-cookie"].startswith("jsprof_session=")
    status, h, _ = _post_form(
        col, "/signin", good, {"Cookie": cookie, "Sec-Fetch-Site": "same-origin"}
    )
    assert status == 303 and h["set-cookie"].startswith("jsprof_session=")


def test_secure_cookie_and_throttle_behind_a_proxy(tmp_path: Path) -> None:
    """--forwarded-allow-ips: a TLS proxy's X-Forwarded-Proto makes the cookie Secure, and
    wrong tokens are throttled per forwarded client: 429 after ten, one log line each."""
    plain = Collector(tmp_path / "a", "--app", "shop:k1")
    try:
        proxied = Collector(
            tmp_path / "b", "--app", "shop:k1", "--forwarded-allow-ips", "127.0.0.1"
        )
    except BaseException:
        plain.stop()
        raise
    try:
        tls = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
        status, h = _signin(plain, **tls)
        assert status == 303 and "secure" not in h["set-cookie"].lower()  # not believed
        status, h = _signin(proxied, **tls)
        assert status == 303 and "; secure" in h["set-cookie"].lower()

        def get(c: Collector, token: str, client: str) -> tuple[int, dict]:
            status, h, _ = c.request(
                "GET",
                "/v1/traces/nope",
                headers={"Authorization": f"Bearer {token}", "X-Forwarded-For": client},
            )
            return status, h

        codes = [get(proxied, f"guess-{i}", "198.51.100.1")[0] for i in range(14)]
        assert codes[:10] == [401] * 10 and set(codes[10:]) == {429}, codes
        status, h = get(proxied, READ_TOKEN, "198.51.100.1")  # the right one too: no oracle
        assert status == 429 and int(h["retry-after"]) >= 1
        assert get(proxied, READ_TOKEN, "198.51.100.2")[0] == 404  # another client
        # Sign-in guesses count too.
        for i in range(3):
            _signin(proxied, token=f"nope-{i}", **{"X-Forwarded-For": "198.51.100.1"})
        status, _, body = proxied.request("GET", "/", headers={"X-Forwarded-For": "198.51.100.1"})
        assert status == 200  # the sign-in page itself is not refused
        nonce, cookie = _signin_form(proxied, {"X-Forwarded-For": "198.51.100.1"})
        status, _, _ = _post_form(
            proxied,
            "/signin",
            {"csrf": nonce, "token": READ_TOKEN},
            {"Cookie": cookie, "X-Forwarded-For": "198.51.100.1"},
        )
        assert status == 429
        # Without trusted proxies every client is the socket's address.
        codes = [
            plain.request("GET", "/v1/traces/x", headers={"Authorization": f"Bearer g{i}"})[0]
            for i in range(12)
        ]
        assert codes[-1] == 429
    finally:
        plain.stop()
        proxied.stop()
    lines = [x for x in proxied.stderr_lines if "wrong tokens" in x]
    assert len(lines) == 1, proxied.stderr_lines
    assert "198.51.100" not in "".join(proxied.stderr_lines)


def test_tokens_from_files_and_environment(tmp_path: Path) -> None:
    (tmp_path / "read").write_text("file-read-token\n")
    (tmp_path / "admin").write_text("file-admin-token\n")
    (tmp_path / "apps").write_text("# ingest keys\nshop:k-file\n\nblog:k-blog\n")
    c = Collector(
        tmp_path / "st",
        "--read-token-file",
        str(tmp_path / "read"),
        "--admin-token-file",
        str(tmp_path / "admin"),
        "--app-file",
        str(tmp_path / "apps"),
        read_token=None,
        env={"JSPROF_APPS": "news:k-env"},
    )
    try:
        raw = fixture_bytes("trace-idle.json")
        assert c.post(raw, "app=shop&key=k-file&id=f1")[0] == 202
        assert c.post(raw, "app=blog&key=k-blog&id=f2")[0] == 202
        assert c.post(raw, "app=news&key=k-env&id=f3")[0] == 202
        assert c.get("f1", "file-read-token")[0] == 200
        status, _, _ = c.request(
            "POST",
            "/v1/sourcemaps?app=shop&release=1",
            b"{}",
            {"Authorization": "Bearer file-admin-token"},
        )
        assert status != 401
    finally:
        c.stop()
    cmdline = Path(f"/proc/{os.getpid()}/cmdline")  # (the collector has exited; its args:)
    assert "file-read-token" not in " ".join(c.proc.args) and cmdline.exists()
    assert not any("warning" in line for line in c.stderr_lines), c.stderr_lines
    assert not any("file-read-token" in line for line in c.stderr_lines)
    # It said "read token as given (file, environment or command line)": say which.
    said = [line for line in c.stderr_lines if "read token" in line]
    assert said == [f"jsprof serve: read token from the file {tmp_path / 'read'} "
                    "(--read-token-file)\n"], c.stderr_lines
    # A token on the command line still works, with a warning naming the safer ways.
    loud = Collector(
        tmp_path / "st2", "--app", "shop:k1", "--read-token", "on-cmdline", read_token=None
    )
    try:
        assert loud.get("x", "on-cmdline")[0] == 404
    finally:
        loud.stop()
    warns = [line for line in loud.stderr_lines if "warning" in line]
    assert len(warns) == 1 and "--read-token-file" in warns[0] and "JSPROF_READ_TOKEN" in warns[0]
    for args in (["--read-token-file", str(tmp_path / "nope")], ["--app-file", str(tmp_path)]):
        r = subprocess.run(
            [str(JSPROF), "serve", "--store", str(tmp_path / "s4"), "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_bad_app_says_where_it_was_given(tmp_path: Path) -> None:
    # A bad line of --app-file or of $JSPROF_APPS was reported as "--app 'shop'", an option
    # the user never gave; an --app-file with no app started a collector refusing everything.
    (tmp_path / "apps").write_text("# keys\nshop:k1\nblog\n")
    (tmp_path / "empty").write_text("# nothing yet\n\n")
    cases = (
        (["--app-file", str(tmp_path / "apps")], {}, f"--app-file {tmp_path / 'apps'} line 3 "
         "'blog': expected NAME:KEY"),
        (["--app-file", str(tmp_path / "empty")], {}, "no NAME:KEY line"),
        ([], {"JSPROF_APPS": "news:k,shop"}, "$JSPROF_APPS 'shop': expected NAME:KEY"),
        (["--app", "shop:k1"], {"JSPROF_APPS": "shop:k2"}, "$JSPROF_APPS: app shop given twice"),
        (["--app", "a b:k"], {}, "--app 'a b:k': expected NAME:KEY"),
    )
    for args, env, said in cases:
        r = subprocess.run(
            [str(JSPROF), "serve", "--store", str(tmp_path / "s"), "--port", "0", *args],
            capture_output=True, text=True, timeout=60,
            env={**{k: v for k, v in os.environ.items() if k != "JSPROF_APPS"}, **env},
        )
        assert r.returncode == 2, (args, env, r.stderr)
        assert said in r.stderr and r.stderr.count("\n") == 1, (said, r.stderr)


def test_id_with_a_trailing_newline_is_refused(col: Collector) -> None:
    raw = fixture_bytes("trace-idle.json")
    for bad in ("nl%0A", "nl%0D%0A", "%0Anl", "nl%00"):
        status, doc = col.post(raw, f"app=shop&key=k1&id={bad}")
        assert status == 400 and "query parameter id" in doc["error"], (bad, status, doc)
    assert col.post(raw, "app=shop&key=k1&id=nl")[0] == 202


def test_long_names_and_urls_are_cut_at_ingest(col: Collector) -> None:
    from jsprof.serve.config import Limits

    lim = Limits()
    doc = orjson.loads(fixture_bytes("trace-idle.json"))
    huge = "f" * (4 << 20) + "_end"
    doc["frames"][0]["name"] = huge
    doc["resources"][0] = "https://a.example/" + "p" * (1 << 20) + ".js"
    for form, body, enc in (
        ("plain", orjson.dumps(doc), None),
        ("gz", gz(orjson.dumps(doc)), "gzip"),
    ):
        status, answer = col.post(body, f"app=shop&key=k1&id=long-{form}", encoding=enc)
        assert status == 202, answer
        data = col.get(f"long-{form}")[1]
        assert len(data) < 64 * 1024, len(data)
        got = orjson.loads(data)
        name = got["frames"][0]["name"]
        assert len(name) == lim.max_name and name.startswith("fff") and name.endswith("_end")
        assert "…" in name
        assert len(got["resources"][0]) == lim.max_url and got["resources"][0].endswith(".js")
        assert got["samples"] == doc["samples"] and got["stacks"] == doc["stacks"]
    # A long route is cut too; a long release is refused.
    status, _ = col.post(orjson.dumps(doc), "app=shop&key=k1&id=long-route&route=/" + "r" * 5000)
    assert status == 202
    assert len(orjson.loads(col.get("long-route")[1])["jsprof"]["meta"]["route"]) == lim.max_url
    status, answer = col.post(orjson.dumps(doc), "app=shop&key=k1&release=" + "1" * 500)
    assert status == 400 and "release" in answer["error"]


def test_damaged_upload_is_a_clear_answer_not_a_500(tmp_path: Path) -> None:
    from jsprof.store import segment as seg

    c = Collector(tmp_path / "st", "--app", "shop:k1")
    try:
        raw = fixture_bytes("trace-idle.json")
        for uid in ("ok-1", "bad-1", "ok-2"):
            assert c.post(raw, f"app=shop&key=k1&id={uid}")[0] == 202
        for path in (tmp_path / "st" / "segments").glob("*.seg"):
            fd = os.open(path, os.O_RDWR)
            try:
                for h in seg.scan(fd):
                    if isinstance(h, seg.RecordHeader) and h.upload_id == "bad-1":
                        at = h.end - 5  # a byte of the body
                        b = os.pread(fd, 1, at)
                        os.pwrite(fd, bytes([b[0] ^ 0x20]), at)
            finally:
                os.close(fd)
        for _ in range(2):
            status, h, body = c.request(
                "GET", "/v1/traces/bad-1", headers={"Authorization": f"Bearer {READ_TOKEN}"}
            )
            assert status == 410, (status, body)
            assert "damaged" in _one_line_error(status, h, body)
        assert c.get("ok-1")[0] == 200 and c.get("ok-2")[0] == 200
        # A client's retry of the damaged one is answered as its first upload was.
        assert c.post(raw, "app=shop&key=k1&id=bad-1") == (202, {"id": "bad-1"})
    finally:
        c.stop()
    lines = [x for x in c.stderr_lines if "damaged on disk" in x]
    assert len(lines) == 1 and "Traceback" not in "".join(c.stderr_lines)


def test_since_nan_is_refused(col: Collector) -> None:
    for bad in ("nan", "NaN", "inf", "-inf"):
        for name in ("since", "until"):
            status, h, body = col.request(
                "GET",
                f"/v1/query/top?app=shop&{name}={bad}",
                headers={"Authorization": f"Bearer {READ_TOKEN}"},
            )
            assert status == 400, (name, bad, status, body)
            assert name in _one_line_error(status, h, body)


def test_access_log_shows_a_500_as_500(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A route that fails is logged with its status (it was "0": Starlette's outer error
    middleware answered after the access log had written its line)."""
    from starlette.routing import Route

    from jsprof.serve.app import create_app
    from jsprof.serve.config import ServeConfig
    from serve_util import asgi_call

    async def boom(request: object) -> None:
        raise RuntimeError("a bug")

    st = Store(tmp_path / "st")
    try:
        app = create_app(ServeConfig(store=str(tmp_path / "st"), access_log=True), st)
        app.router.routes.append(Route("/boom", boom))
        status, h, body = asgi_call(app, "GET", "/boom")
    finally:
        st.close()
    assert status == 500 and orjson.loads(body) == {
        "error": "internal error; see the collector's stderr"
    }
    assert h["x-content-type-options"] == "nosniff"
    err = capsys.readouterr().err
    assert "GET /boom 500 " in err, err


def test_depth_limit_by_binary_lifting_matches_stack_depths() -> None:
    """The ingest's O(log n) depth check decides as the exact depths do."""
    import numpy as np

    from jsprof.serve.ingest import _deeper_than
    from jsprof.trace import stack_depths

    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 400))
        parent = np.full(n, -1, np.int32)
        for i in range(1, n):
            if rng.random() < 0.95:
                parent[i] = rng.integers(max(0, i - 3), i)
        d = int(stack_depths(parent).max())
        for limit in {1, 2, 3, 7, 64, 1024, max(1, d - 1), d, d + 1}:
            assert _deeper_than(parent, limit) == (d > limit), (n, d, limit)
