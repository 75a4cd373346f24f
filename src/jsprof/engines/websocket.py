"""The WebSocket client side that CDP needs (RFC 6455): `ws://` on a loopback or given
host, text messages both ways, no extensions.

Why not a library: `jsprof record --engine node` pays for its imports on every run, and
the `websockets` package alone cost ~85 ms of CPU to import (importlib.metadata, ssl,
email, asyncio-era modules; measured with `perf stat` under load) against ~75 ms for the
whole of `node --cpu-prof` on an empty script. This module imports only the standard
library's socket layer. Reads happen on the caller's thread through `select` (no reader
thread, no queue: a signal during a wait only makes `select` retry).

`WebSocket` offers what `CDPClient` uses of a connection: `send(text)`, `recv(timeout)`
(bytes of the next message; TimeoutError when none is complete in time; ConnectionClosed
once the other end closed) and `close()`.

A message is at most `max_message` bytes (default `MAX_MESSAGE_BYTES`, 1 GiB, or
$JSPROF_CDP_MAX_MESSAGE_MB): CDP profiles are taken in slices while recording (a slice is
a few MB), and a whole unsliced profile of an hour at 1 ms is some 20-40 MB (a Node 20
profile holds 5-10 bytes a sample besides its nodes), so the limit only stops a peer that
announces more than this process should hold. A frame header, or the fragments so far,
beyond it raise `MessageTooBig` before its payload is read, and the connection is closed
(its next bytes would be the payload we did not read).
"""

from __future__ import annotations

import base64
import os
import select
import socket
import struct
import threading
import time
from urllib.parse import urlsplit

try:
    # CPython's own SHA-1, for the handshake's one digest: hashlib loads OpenSSL's libcrypto
    # (~2.5 ms of CPU, measured), a price every `jsprof record --engine node` paid.
    from _sha1 import sha1 as _sha1
except ImportError:  # another Python, or built without it
    from hashlib import sha1 as _sha1

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE_BYTES = 1 << 30
MAX_MESSAGE_ENV = "JSPROF_CDP_MAX_MESSAGE_MB"
_MAX_HEADER = 64 << 10  # the server's HTTP response head
_CHUNK = 1 << 16  # bytes per read, up to 16 times more while a big message arrives
_TEXT, _BINARY, _CONT, _CLOSE, _PING, _PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA


class ConnectionClosed(Exception):
    """The connection is closed (by the other end, by us, or broken)."""


class HandshakeError(OSError):
    """The server did not accept the WebSocket upgrade."""


class MessageTooBig(Exception):
    """The other end sent (or announced) a message over the size limit; the connection is
    closed. The text names the limit and how to raise it."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"the inspector sent a message of {size} bytes, over the limit of {limit} bytes "
            f"({limit / (1 << 20):g} MiB); set {MAX_MESSAGE_ENV} to a larger number of MiB "
            "if that is a real profile"
        )


def max_message_bytes() -> int:
    """The limit: $JSPROF_CDP_MAX_MESSAGE_MB (a whole number of MiB, at least 1), else
    MAX_MESSAGE_BYTES. A malformed value is a UsageError naming the variable."""
    raw = os.environ.get(MAX_MESSAGE_ENV)
    if raw is None or not raw.strip():
        return MAX_MESSAGE_BYTES
    try:
        mb = int(raw.strip())
    except ValueError:
        mb = 0
    if not 1 <= mb <= 1 << 20:
        from ..errors import UsageError

        raise UsageError(
            f"{MAX_MESSAGE_ENV}={raw!r}: give the largest CDP message in MiB, a whole "
            f"number from 1 to {1 << 20} (default {MAX_MESSAGE_BYTES >> 20})"
        )
    return mb << 20


def _mask(data: bytes, key: bytes) -> bytes:
    n = len(data)
    if not n:
        return data
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to `host`: an IP address (the inspector's 127.0.0.1) is connected to
    directly, a name through create_connection. getaddrinfo encodes every host with the
    idna codec first, whose import (stringprep, unicodedata) cost ~1 ms of each record."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect((host, port))
        except BaseException:
            sock.close()
            raise
        return sock
    return socket.create_connection((host, port), timeout=timeout)


class WebSocket:
    """A client connection to `url` (`ws://host:port/path`), open once constructed."""

    def __init__(
        self, url: str, open_timeout: float = 10.0, max_message: int | None = None
    ) -> None:
        self.max_message = max_message_bytes() if max_message is None else max_message
        u = urlsplit(url)
        if u.scheme != "ws" or not u.hostname:
            raise HandshakeError(f"not a ws:// URL: {url!r}")
        port = u.port or 80
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self._sock = _connect(u.hostname, port, open_timeout)
        try:
            self._handshake(u.netloc, path, open_timeout)
        except BaseException:
            self._sock.close()
            raise
        self._sock.settimeout(None)  # reads wait in select; sends block until written
        self._send_lock = threading.Lock()
        self._closed = False
        self._parts: list[bytes] = []  # a fragmented message so far
        self._parts_len = 0

    @property
    def socket(self) -> socket.socket:
        return self._sock

    def _handshake(self, host: str, path: str, timeout: float) -> None:
        key = base64.b64encode(os.urandom(16))
        self._sock.sendall(
            b"GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
            % (path.encode(), host.encode(), key)
        )
        deadline = time.monotonic() + timeout
        buf = b""
        while b"\r\n\r\n" not in buf:
            if len(buf) > _MAX_HEADER:
                raise HandshakeError("the WebSocket handshake response is too long")
            self._sock.settimeout(max(deadline - time.monotonic(), 0.001))
            got = self._sock.recv(4096)
            if not got:
                raise HandshakeError("the server closed the connection during the handshake")
            buf += got
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = lines[0].split(None, 2)
        if len(status) < 2 or status[1] != b"101":
            raise HandshakeError(f"the server refused the WebSocket upgrade: {lines[0]!r}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        want = base64.b64encode(_sha1(key + _GUID).digest())
        if headers.get(b"sec-websocket-accept") != want:
            raise HandshakeError("the server's Sec-WebSocket-Accept does not match our key")
        self._buf = bytearray(rest)

    # -- sending
    def _send_frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        key = os.urandom(4)
        with self._send_lock:
            if self._closed:
                raise ConnectionClosed("the connection is closed")
            try:
                self._sock.sendall(head + key + _mask(payload, key))
            except OSError:
                self._closed = True
                raise ConnectionClosed("the connection broke while sending") from None

    def send(self, message: str | bytes) -> None:
        """Send a text message (bytes are sent as they are: they must be UTF-8)."""
        self._send_frame(_TEXT, message.encode() if isinstance(message, str) else message)

    # -- receiving
    def _fill(self, need: int, deadline: float | None) -> None:
        """Read until the buffer holds `need` bytes (TimeoutError at the deadline)."""
        buf = self._buf
        while len(buf) < need:
            if self._closed:
                raise ConnectionClosed("the connection is closed")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                # Zero timeout still takes what is already readable.
                if not select.select([self._sock], [], [], 0)[0]:
                    raise TimeoutError
            elif not select.select([self._sock], [], [], left)[0]:
                raise TimeoutError
            try:
                got = self._sock.recv(min(max(_CHUNK, need - len(buf)), 16 * _CHUNK))
            except (ConnectionResetError, BrokenPipeError, OSError):
                got = b""
            if not got:
                self._closed = True
                raise ConnectionClosed("the other end closed the connection")
            buf += got

    def recv(self, timeout: float | None = None) -> bytes:
        """The next message's payload; TimeoutError when no whole message arrives within
        `timeout` s (0: only what is already there), ConnectionClosed once closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._fill(2, deadline)
            b0, b1 = self._buf[0], self._buf[1]
            n = b1 & 0x7F
            at = 2
            if n == 126:
                self._fill(4, deadline)
                n = struct.unpack_from("!H", self._buf, 2)[0]
                at = 4
            elif n == 127:
                self._fill(10, deadline)
                n = struct.unpack_from("!Q", self._buf, 2)[0]
                at = 10
            opcode = b0 & 0x0F
            total = n + (self._parts_len if opcode == _CONT else 0)
            if total > self.max_message:
                # Checked before the payload is read: a peer announcing 2**63 bytes gets
                # no memory. The rest of this frame is not read, so the stream is lost.
                self._abort()
                raise MessageTooBig(total, self.max_message)
            masked = b1 & 0x80
            end = at + (4 if masked else 0) + n
            # A big message (a profile) is read whole before it is taken from the buffer;
            # a timeout meanwhile keeps what arrived, and the next call goes on.
            self._fill(end, deadline)
            payload = bytes(self._buf[at + (4 if masked else 0) : end])
            if masked:  # servers must not mask, but undoing it costs nothing to support
                payload = _mask(payload, bytes(self._buf[at : at + 4]))
            del self._buf[:end]
            fin = b0 & 0x80
            if opcode in (_TEXT, _BINARY, _CONT):
                if not fin:
                    self._parts.append(payload)
                    self._parts_len += len(payload)
                    continue
                if self._parts:
                    payload = b"".join([*self._parts, payload])
                    self._parts = []
                    self._parts_len = 0
                return payload
            if opcode == _PING:
                self._send_frame(_PONG, payload)
            elif opcode == _CLOSE:
                with self._send_lock:
                    closed, self._closed = self._closed, True
                if not closed:
                    try:
                        self._sock.sendall(b"\x88\x80" + os.urandom(4))  # close, no body
                    except OSError:
                        pass
                raise ConnectionClosed("the other end closed the connection")

    def _abort(self) -> None:
        """Close at once (status 1009, message too big), dropping what was buffered."""
        with self._send_lock:
            closed, self._closed = self._closed, True
            if not closed:
                try:
                    key = os.urandom(4)
                    self._sock.sendall(b"\x88\x82" + key + _mask(struct.pack("!H", 1009), key))
                except OSError:
                    pass
        self._buf = bytearray()
        self._parts = []
        self._parts_len = 0
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        """Say goodbye (a close frame) and close the socket; never raises."""
        with self._send_lock:
            closed, self._closed = self._closed, True
            if not closed:
                try:
                    self._sock.sendall(b"\x88\x82" + b"\0\0\0\0" + struct.pack("!H", 1000))
                except OSError:
                    pass
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
