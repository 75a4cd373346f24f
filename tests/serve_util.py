"""A real `jsprof serve` process on loopback, a small HTTP client for tests, and its
dashboard signed in (Playwright)."""

from __future__ import annotations

import gzip
import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

FIXTURES = Path(__file__).parent / "data" / "chromium"
PY = Path(sys.executable)
JSPROF = PY.parent / "jsprof"
READ_TOKEN = "test-read-token"


class Collector:
    """`jsprof serve --port 0 ...` as a subprocess; `url` from its first stdout line."""

    def __init__(
        self,
        store: Path,
        *args: str,
        read_token: str | None = READ_TOKEN,
        nofile: int | None = None,
        env: dict[str, str] | None = None,
        wrap: list[str] | None = None,
    ) -> None:
        cmd = [str(JSPROF), "serve", "--store", str(store), "--port", "0", *args]
        if wrap:  # e.g. a shell that mounts a small tmpfs first, then execs the collector
            cmd = [*wrap, *cmd]
        base = {k: v for k, v in os.environ.items() if k != "JSPROF_READ_TOKEN"}
        base.update(env or {})
        if read_token:
            # From the environment, as docs/field.md says: never on the command line.
            base["JSPROF_READ_TOKEN"] = read_token

        def limit() -> None:  # a small open-file limit, as on many hosts (ulimit -n)
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=base,
            preexec_fn=limit if nofile else None,
        )
        self.stderr_lines: list[str] = []
        line = self.proc.stdout.readline().decode()
        prefix = "jsprof serve: listening on "
        if not line.startswith(prefix):
            self.proc.kill()
            err = self.proc.stderr.read().decode()
            raise AssertionError(f"bad first line {line!r}; stderr: {err}")
        self.first_line = line
        self.url = line[len(prefix) :].strip()
        u = urlsplit(self.url)
        self.host, self.port = u.hostname, u.port
        self._err = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err.start()

    def _drain_stderr(self) -> None:
        for raw in self.proc.stderr:
            self.stderr_lines.append(raw.decode(errors="replace"))

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def post(
        self,
        body: bytes,
        query: str = "app=shop&key=k1",
        ctype: str = "application/json",
        encoding: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict]:
        h = {"Content-Type": ctype} if ctype else {}
        if encoding:
            h["Content-Encoding"] = encoding
        h.update(headers or {})
        status, _, data = self.request("POST", f"/v1/traces?{query}", body, h)
        return status, orjson.loads(data) if data else {}

    def get(self, upload_id: str, token: str | None = READ_TOKEN) -> tuple[int, bytes]:
        h = {"Authorization": f"Bearer {token}"} if token else {}
        status, _, data = self.request("GET", f"/v1/traces/{upload_id}", headers=h)
        return status, data

    def wait_stored(self, *upload_ids: str, timeout: float = 15) -> list[bytes]:
        """Each upload as the collector serves it, once it is stored (a browser's upload
        arrives some time after the page said it sent it); fails past `timeout` s."""
        deadline = time.monotonic() + timeout
        out = []
        for upload_id in upload_ids:
            while (got := self.get(upload_id))[0] != 200:
                assert time.monotonic() < deadline, f"upload {upload_id} never arrived"
                time.sleep(0.1)
            out.append(got[1])
        return out

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> float:
        """Signal it; return how long it took to exit (fails past `timeout`)."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"collector did not exit within {timeout} s of signal {sig}"
            ) from None
        self._err.join(timeout=5)
        return time.monotonic() - t0

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def signed_in(page: Any, url: str, token: str = READ_TOKEN) -> None:
    """Open the collector's dashboard at `url` in a Playwright page and sign in with
    `token`; returns once the page has loaded its data (body[data-ready])."""
    page.goto(url + "/")
    page.fill("#token", token)
    page.click("#signin")
    page.wait_for_selector("body[data-ready='1']", timeout=120000)


def fixture_bytes(name: str = "trace-basic.json") -> bytes:
    return (FIXTURES / name).read_bytes()


def gz(data: bytes) -> bytes:
    return gzip.compress(data, 6)


def field_trace(n_samples: int = 6000, seed: int = 1) -> bytes:
    """A field-sized trace: Chromium's own frames and stacks, its sampling pattern stretched
    to `n_samples` samples at ~10 ms (timestamps with the usual binary fractions)."""
    doc = orjson.loads(fixture_bytes())
    base = doc["samples"]
    span = base[-1]["timestamp"] - base[0]["timestamp"] + 10.0
    samples = []
    for i in range(n_samples):
        s = dict(base[(i * 7 + seed) % len(base)])
        s["timestamp"] = base[i % len(base)]["timestamp"] + span * (i // len(base)) + seed * 0.1
        samples.append(s)
    doc["samples"] = samples
    doc["resources"] = [r.split("?")[0] for r in doc["resources"]]
    return orjson.dumps(doc)


def asgi_call(
    app: object,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    client: tuple[str, int] = ("127.0.0.1", 50000),
    scheme: str = "http",
) -> tuple[int, dict[str, str], bytes]:
    """One request straight into the ASGI app (lifespan included), for checks a real socket
    cannot make: what is still alive once the request is answered, headers an HTTP parser
    would refuse first."""
    import anyio

    return anyio.run(asgi_call_async, app, method, path, body, headers, client, scheme)


async def asgi_call_async(
    app: object,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    client: tuple[str, int] = ("127.0.0.1", 50000),
    scheme: str = "http",
    lifespan: bool = True,
) -> tuple[int, dict[str, str], bytes]:
    import anyio

    if lifespan:
        async with _lifespan(app):
            return await asgi_call_async(app, method, path, body, headers, client, scheme, False)
    p, _, q = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": scheme,
        "path": p,
        "raw_path": p.encode(),
        "query_string": q.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": client,
        "server": ("127.0.0.1", 8400),
        "state": getattr(app, "_test_state", {}),
    }
    sent = False
    out: dict = {"body": b""}

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        return {"type": "http.disconnect"}  # pragma: no cover

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = {k.decode().lower(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            out["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return out["status"], out["headers"], out["body"]


class _lifespan:
    def __init__(self, app: object) -> None:
        self.app = app

    async def __aenter__(self) -> None:
        import anyio

        self.tg = anyio.create_task_group()
        await self.tg.__aenter__()
        self.to_app = anyio.create_memory_object_stream(4)
        self.from_app = anyio.create_memory_object_stream(4)
        state: dict = {}
        self.app._test_state = state
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": state}
        self.tg.start_soon(self.app, scope, self.to_app[1].receive, self.from_app[0].send)
        await self.to_app[0].send({"type": "lifespan.startup"})
        msg = await self.from_app[1].receive()
        assert msg["type"] == "lifespan.startup.complete", msg

    async def __aexit__(self, *exc: object) -> None:
        await self.to_app[0].send({"type": "lifespan.shutdown"})
        await self.from_app[1].receive()
        await self.tg.__aexit__(None, None, None)
