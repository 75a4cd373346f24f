"""jsprof's own WebSocket client (engines/websocket.py): against Node's real inspector,
and against a loopback server that does what Node never does (fragments, pings, refusals)."""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading

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
