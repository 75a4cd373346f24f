"""jsprof's own WebSocket client (engines/websocket.py): against Node's real inspector,
and against a loopback server that does what Node never does (fragments, pings, refusals)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import struct
import threading
import time

import pytest

from jsprof.engines.cdp import CDPClient
from jsprof.engines.node import NodeProcess
from jsprof.engines.websocket import ConnectionClosed, HandshakeError, WebSocket
from jsprof.errors import EngineError

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def test_node_inspector_messages_of_every_length_class() -> None:
    # Replies under 126 bytes, under 64 KiB and beyond (the 7-, 16- and 64-bit lengths).
    proc = NodeProcess(["-e", "setInterval(() => {}, 1000)"])
    try:
        with CDPClient(proc.url or "") as c:
            for n in (10, 60_000, 3_000_000):
                r = c.session.send(
                    "Runtime.evaluate",
                    {"expression": f"'é'.repeat({n})", "returnByValue": True},
                )
                assert r["result"]["value"] == "é" * n
    finally:
        proc.kill()


def _frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    b0 = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        return struct.pack("!BB", b0, n) + payload
    if n < 1 << 16:
        return struct.pack("!BBH", b0, 126, n) + payload
    return struct.pack("!BBQ", b0, 127, n) + payload


def _read_client_frame(conn: socket.socket) -> tuple[int, bytes]:
    def take(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            got = conn.recv(n - len(buf))
            assert got, "the client closed"
            buf += got
        return buf

    b0, b1 = take(2)
    assert b1 & 0x80, "client frames must be masked"
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", take(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", take(8))
    key = take(4)
    data = bytes(c ^ key[i % 4] for i, c in enumerate(take(n)))
    return b0 & 0x0F, data


def _serve(script, status: bytes = b"101 Switching Protocols", accept_ok: bool = True):
    """A one-connection server on a random loopback port running `script(conn)` after
    the handshake; returns (url, thread, box of what the script recorded)."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    box: dict = {}

    def run() -> None:
        conn, _ = srv.accept()
        with conn, srv:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            key = next(
                line.split(b":", 1)[1].strip()
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"sec-websocket-key:")
            )
            accept = base64.b64encode(hashlib.sha1(key + (_GUID if accept_ok else b"x")).digest())
            conn.sendall(
                b"HTTP/1.1 %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Accept: %s\r\n\r\n" % (status, accept)
            )
            if status.startswith(b"101") and accept_ok:
                script(conn, box)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return f"ws://127.0.0.1:{port}/devtools", th, box


def test_fragments_pings_and_the_server_closing() -> None:
    def script(conn: socket.socket, box: dict) -> None:
        # A message in three fragments with a ping between them, then a close.
        conn.sendall(_frame(0x1, b'{"a":', fin=False) + _frame(0x9, b"hi"))
        conn.sendall(_frame(0x0, b"1,", fin=False) + _frame(0x0, b'"b":2}'))
        box["pong"] = _read_client_frame(conn)
        box["text"] = _read_client_frame(conn)
        conn.sendall(_frame(0x8, struct.pack("!H", 1000)))
        box["close"] = _read_client_frame(conn)

    url, th, box = _serve(script)
    ws = WebSocket(url)
    assert ws.recv(5) == b'{"a":1,"b":2}'
    ws.send("é" * 70_000)  # a 16-bit length, masked
    with pytest.raises(ConnectionClosed):
        ws.recv(5)
    with pytest.raises(ConnectionClosed):
        ws.send("after the close")
    ws.close()
    th.join(5)
    assert box["pong"] == (0xA, b"hi")
    assert box["text"] == (0x1, ("é" * 70_000).encode())
    assert box["close"][0] == 0x8


def test_recv_times_out_and_keeps_a_partial_message() -> None:
    release = threading.Event()

    def script(conn: socket.socket, box: dict) -> None:
        frame = _frame(0x1, b"x" * 200_000)
        conn.sendall(frame[:1000])
        release.wait(5)
        conn.sendall(frame[1000:])
        _read_client_frame(conn)  # our close

    url, th, _ = _serve(script)
    ws = WebSocket(url)
    with pytest.raises(TimeoutError):
        ws.recv(0.05)
    with pytest.raises(TimeoutError):
        ws.recv(0)
    release.set()
    assert ws.recv(5) == b"x" * 200_000
    ws.close()
    th.join(5)


@pytest.mark.parametrize(
    "status,accept_ok", [(b"404 Not Found", True), (b"101 Switching Protocols", False)]
)
def test_a_refused_handshake_is_one_line(status: bytes, accept_ok: bool) -> None:
    url, th, _ = _serve(lambda conn, box: None, status=status, accept_ok=accept_ok)
    with pytest.raises(HandshakeError):
        WebSocket(url)
    th.join(5)
    url, th, _ = _serve(lambda conn, box: None, status=status, accept_ok=accept_ok)
    with pytest.raises(EngineError) as e:
        CDPClient(url)
    assert "cannot connect to the inspector" in str(e.value)
    assert "\n" not in str(e.value)
    th.join(5)


def test_an_inspectors_id_is_in_no_message() -> None:
    """The id in an inspector's URL is its only key (whoever has it runs code in that
    process): a connection that fails says the host and port, not the id (it went into
    the recording's meta of `record -- COMMAND` and onto stderr)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    uid = "0f5b4c3e-9d2a-4b7e-8c1f-6a2d9e3b7c41"
    with pytest.raises(EngineError) as e:
        CDPClient(f"ws://127.0.0.1:{port}/{uid}", open_timeout=2.0)
    assert f"ws://127.0.0.1:{port}/..." in str(e.value), str(e.value)
    assert uid not in str(e.value)


# ---- the message size limit (issue 20) ------------------------------------------------------


def test_an_announced_oversized_message_is_refused_before_its_payload() -> None:
    # A frame header claiming 1 TiB and then nothing: refused at once from the header
    # (no waiting for, nor buffering of, the payload), the limit named, status 1009 sent.
    from jsprof.engines.websocket import MAX_MESSAGE_BYTES, MessageTooBig

    def script(conn: socket.socket, box: dict) -> None:
        conn.sendall(struct.pack("!BBQ", 0x81, 127, 1 << 40))
        box["close"] = _read_client_frame(conn)

    url, th, box = _serve(script)
    ws = WebSocket(url)
    assert ws.max_message == MAX_MESSAGE_BYTES == 1 << 30
    t0 = time.monotonic()
    with pytest.raises(MessageTooBig) as e:
        ws.recv(10)
    assert time.monotonic() - t0 < 5
    text = str(e.value)
    assert f"{1 << 40} bytes" in text and f"{1 << 30} bytes (1024 MiB)" in text
    assert "JSPROF_CDP_MAX_MESSAGE_MB" in text and "\n" not in text
    with pytest.raises(ConnectionClosed):
        ws.recv(0)
    ws.close()
    th.join(5)
    assert box["close"] == (0x8, struct.pack("!H", 1009))


def test_the_limit_counts_a_fragmented_message_whole() -> None:
    from jsprof.engines.websocket import MessageTooBig

    limit = 1 << 20

    def script(conn: socket.socket, box: dict) -> None:
        conn.sendall(_frame(0x1, b"a" * limit))  # exactly the limit: taken
        part = b"b" * (400 << 10)
        conn.sendall(_frame(0x1, part, fin=False) + _frame(0x0, part, fin=False))
        conn.sendall(_frame(0x0, part))  # 1.2 MiB in all
        box["close"] = _read_client_frame(conn)

    url, th, box = _serve(script)
    ws = WebSocket(url, max_message=limit)
    assert ws.recv(10) == b"a" * limit
    with pytest.raises(MessageTooBig) as e:
        ws.recv(10)
    assert e.value.size == 3 * (400 << 10) and e.value.limit == limit
    ws.close()
    th.join(5)
    assert box["close"][0] == 0x8


def test_the_limit_is_configurable_and_a_bad_value_is_one_line(monkeypatch) -> None:
    from jsprof.engines.websocket import max_message_bytes
    from jsprof.errors import UsageError

    monkeypatch.setenv("JSPROF_CDP_MAX_MESSAGE_MB", "2048")
    assert max_message_bytes() == 2048 << 20
    for bad in ("abc", "0", "-5", "1.5"):
        monkeypatch.setenv("JSPROF_CDP_MAX_MESSAGE_MB", bad)
        with pytest.raises(UsageError) as e:
            max_message_bytes()
        assert str(e.value).startswith(f"JSPROF_CDP_MAX_MESSAGE_MB={bad!r}: ")


def test_cdp_client_says_which_limit_a_reply_broke() -> None:
    # Through the CDP client, as `jsprof record` meets it: an EngineError naming the limit,
    # the connection marked closed.
    def script(conn: socket.socket, box: dict) -> None:
        box["command"] = _read_client_frame(conn)
        conn.sendall(struct.pack("!BBQ", 0x81, 127, 3 << 30))
        _read_client_frame(conn)

    url, th, box = _serve(script)
    c = CDPClient(url)
    with pytest.raises(EngineError) as e:
        c.session.send("Profiler.stop", timeout=10)
    assert f"over the limit of {1 << 30} bytes" in str(e.value)
    assert c.closed
    c.close()
    th.join(5)


def test_a_debugging_pipe_message_over_the_limit() -> None:
    # Chromium's pipe has no length up front: what piles up without a NUL is bounded.
    import os

    from jsprof.engines.cdp_pipe import PipeConnection
    from jsprof.engines.websocket import MessageTooBig

    r, w = os.pipe()
    r2, w2 = os.pipe()
    conn = PipeConnection(r, w2, max_message=1 << 16)
    try:
        os.write(w, b'{"id":1}\0')
        assert conn.recv(5) == b'{"id":1}'
        data = b"x" * (1 << 17)

        def feed() -> None:
            with contextlib.suppress(OSError):
                os.write(w, data)

        t = threading.Thread(target=feed, daemon=True)
        t.start()
        with pytest.raises(MessageTooBig):
            while True:
                conn.recv(5)
        with pytest.raises(ConnectionClosed):
            conn.recv(0)
    finally:
        conn.close()
        for fd in (w, r2):
            with contextlib.suppress(OSError):
                os.close(fd)


def test_node_inspector_over_a_lowered_limit(monkeypatch) -> None:
    # The real inspector: a 3 MB reply fits the default limit (above), not a 1 MiB one.
    monkeypatch.setenv("JSPROF_CDP_MAX_MESSAGE_MB", "1")
    proc = NodeProcess(["-e", "setInterval(() => {}, 1000)"])
    try:
        with CDPClient(proc.url or "") as c:
            small = c.session.send("Runtime.evaluate", {"expression": "'x'.repeat(1000)"})
            assert small["result"]["value"] == "x" * 1000
            with pytest.raises(EngineError) as e:
                c.session.send(
                    "Runtime.evaluate",
                    {"expression": "'x'.repeat(3000000)", "returnByValue": True},
                )
            assert "over the limit of 1048576 bytes (1 MiB)" in str(e.value)
    finally:
        proc.kill()
