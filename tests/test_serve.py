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
    assert any(token in line for line in c.stderr_lines)
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
