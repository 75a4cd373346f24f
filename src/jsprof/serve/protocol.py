"""uvicorn's HTTP protocol with what a collector on the open internet needs against slow
clients (slowloris): read deadlines and a cap on open connections.

uvicorn has neither: a connection that dribbles its headers (or never sends a byte) or its
body is held for ever, and enough of them exhaust the file descriptors, so legitimate
uploads get no connection at all. Here every connection waiting for its client is on a
clock:

- the request line and headers must arrive within `read_timeout` seconds of the connection
  (or of the previous response, on a kept-alive connection), however they are dribbled;
- a body must never stall for longer than `read_timeout` while we are reading it (a pause
  that is ours, when the app is busy and reading is paused, does not count), and must be
  complete within `body_timeout`;
- with `max_connections` open, a new connection closes the one that has waited longest for
  its client (an attacker's, since a real upload sends at once); when every connection is
  being served, the new one is answered 503.

A sweeper on the event loop checks the clocks once per `_SWEEP_S`, so the cost is one pass
over the open connections per tick, not a timer per read.
"""

from __future__ import annotations

import asyncio
import resource
import sys
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_SWEEP_S = 0.5
_HEAD, _BODY, _APP = "head", "body", "app"  # waiting for headers / for body / on us


def _raw_answer(status: int, reason: str, message: str) -> bytes:
    body = orjson.dumps({"error": message})
    return b"".join(
        (
            f"HTTP/1.1 {status} {reason}\r\n".encode(),
            b"content-type: application/json\r\n",
            b"x-content-type-options: nosniff\r\n",
            f"content-length: {len(body)}\r\n".encode(),
            b"connection: close\r\n\r\n",
            body,
        )
    )


def connection_cap(wanted: int) -> int:
    """`wanted`, lowered to what the file-descriptor limit allows (raised to the hard limit
    first), leaving room for the store's files, the thread pool and the listening socket."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            new = hard if hard != resource.RLIM_INFINITY else max(soft, wanted * 2)
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    reserve = max(64, soft // 8)
    return max(1, min(wanted, soft - reserve))


class GuardedProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with read deadlines and a connection cap (settings set by
    `configure`, per worker process)."""

    read_timeout: float = 10.0
    body_timeout: float = 120.0
    max_connections: int = 1000
    _sweeper: asyncio.TimerHandle | None = None
    _conns: Any = None
    evicted = 0
    timed_out = 0

    @classmethod
    def configure(cls, read_timeout: float, body_timeout: float, max_connections: int) -> None:
        cls.read_timeout = read_timeout
        cls.body_timeout = body_timeout
        cls.max_connections = max_connections

    # ---- states ----

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        now = self.loop.time()
        self._phase = _HEAD
        self._since = now  # when this wait for the client began
        self._last = now  # the client's last bytes
        self._got_bytes = False
        super().connection_made(transport)
        cls = type(self)
        if cls._sweeper is None or cls._conns is not self.connections:
            cls._conns = self.connections
            cls._sweeper = self.loop.call_later(_SWEEP_S, cls._sweep, self.loop, self.connections)
        if len(self.connections) > self.max_connections:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        self._last = self.loop.time()
        self._got_bytes = True
        super().data_received(data)

    def on_message_begin(self) -> None:
        if self._phase != _HEAD:
            self._phase = _HEAD
            self._since = self.loop.time()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._phase = _BODY
        self._since = self._last = self.loop.time()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._phase = _APP
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if self._phase == _APP or self.cycle is None or not self.cycle.more_body:
            # Kept alive: the next request's headers are on the clock from now.
            self._phase = _HEAD
            self._since = self._last = self.loop.time()
            self._got_bytes = False
        # else: answered before its body arrived (413, 401): the rest of the body is
        # still on the body clocks while it drains.
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer is text/plain; every 4xx of ours is one line of JSON.
        self.transport.write(
            _raw_answer(400, "Bad Request", f"not a valid HTTP request ({msg.rstrip('.')})")
        )
        self.transport.close()

    # ---- the clocks ----

    def _waiting(self) -> bool:
        return self._phase in (_HEAD, _BODY) and not self.transport.is_closing()

    def _expire(self, why: str) -> None:
        type(self).timed_out += 1
        responding = self.cycle is not None and self.cycle.response_started
        if self._got_bytes and not responding and not self.transport.is_closing():
            self.transport.write(_raw_answer(408, "Request Timeout", why))
        self.transport.close()

    def _check(self, now: float) -> None:
        if not self._waiting():
            return
        if self._phase == _HEAD:
            if now - self._since > self.read_timeout:
                self._expire(f"request headers not complete within {self.read_timeout:g} s")
        elif now - self._since > self.body_timeout:
            self._expire(f"request body not complete within {self.body_timeout:g} s")
        elif self.flow.read_paused:
            self._last = now  # the wait is ours (the app reads on when it can), not theirs
        elif now - self._last > self.read_timeout:
            self._expire(f"request body stalled for over {self.read_timeout:g} s")

    @classmethod
    def _sweep(cls, loop: asyncio.AbstractEventLoop, conns: Any) -> None:
        now = loop.time()
        for conn in list(conns):
            if isinstance(conn, GuardedProtocol):
                try:
                    conn._check(now)
                except Exception as e:  # noqa: BLE001 - one bad connection must not stop the sweep
                    print(f"jsprof serve: read-timeout check failed: {e!r}", file=sys.stderr)
        if loop.is_closed():
            return
        cls._sweeper = loop.call_later(_SWEEP_S, cls._sweep, loop, conns)

    def _make_room(self) -> None:
        """Over the cap: close whoever has waited longest for its client, else refuse this
        one."""
        oldest: GuardedProtocol | None = None
        for conn in self.connections:
            if conn is self or not isinstance(conn, GuardedProtocol) or not conn._waiting():
                continue
            if oldest is None or conn._since < oldest._since:
                oldest = conn
        cls = type(self)
        cls.evicted += 1
        if cls.evicted == 1:
            print(
                f"jsprof serve: at the limit of {self.max_connections} open connections; "
                "closing the slowest (see --max-connections)",
                file=sys.stderr,
                flush=True,
            )
        if oldest is not None:
            oldest._expire("the collector is at its connection limit; this request was too slow")
            return
        self.transport.write(
            _raw_answer(503, "Service Unavailable", "the collector is at its connection limit")
        )
        self.transport.close()
