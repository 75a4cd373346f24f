"""One small Chrome DevTools Protocol client, synchronous, on our own WebSocket (websocket.py).

Used by the Node engine (and later by a Chromium engine). A `CDPClient` owns the
WebSocket; `Session`s speak to one target through it: the root session directly, a Node
worker's session by wrapping messages in `NodeWorker.sendMessageToWorker` (Node's own
way), a Chromium target's by the flattened `sessionId` key. Events that arrive while
waiting for a reply are kept per session, in order, for `next_event`/`events`.

Everything happens on the caller's thread: `pump()` reads what has arrived (with a
short timeout so Ctrl-C and deadlines stay responsive) and routes it. Several threads may
use one client (a ProfilerManager's end() from one thread while another waits for an
eval): one lock makes each send (id, pending entry, frame) and each pump atomic, and a
reply read by one thread's pump is routed to the session that waits for it.
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import EngineError
from ._v8text import reply_with_profile
from .websocket import ConnectionClosed, MessageTooBig, WebSocket

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only
# Messages are parsed by the stdlib's json; from this size on by orjson, imported then. A
# recording's messages are small (its threads' profiles stay text, _v8text.py), and
# orjson's import cost ~13 ms of CPU (it imports dataclasses, inspect, uuid, platform,
# datetime: measured, issue 32), a tenth of a 4-line tsc's recording process. Big ones
# (a page's profile) parse ~1.7x faster with orjson (700 KB: 3.3 against 5.8 ms).
_BIG = 1 << 18


def _dumps(msg: dict) -> str:
    """A command's text (compact; non-ASCII escaped, as JSON allows)."""
    return json.dumps(msg, separators=(",", ":"))


def _loads(raw: bytes | str) -> Any:
    if len(raw) < _BIG:
        return json.loads(raw)
    import orjson

    return orjson.loads(raw)


# The browser's answer to a command for a flattened session it no longer has: the target
# (a worker, an iframe) went away before the command reached it.
SESSION_NOT_FOUND = -32001


class CDPError(EngineError):
    """The other end answered a command with an error."""

    def __init__(self, method: str, error: dict) -> None:
        self.code = error.get("code")
        self.error_message = str(error.get("message", ""))
        super().__init__(f"CDP {method} failed: {self.error_message} ({self.code})")


class CDPClosed(EngineError):
    """The connection closed (the target went away)."""


class CDPTimeout(EngineError):
    """No reply in time, the connection still open (the target is busy, stopped or hung)."""


class Session:
    """Commands to and events from one target."""

    def __init__(
        self,
        client: CDPClient,
        session_id: str | None,
        via_node_worker: bool,
        parent: Session | None = None,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.via_node_worker = via_node_worker
        self.parent = parent  # the session a Node worker's messages are wrapped through
        self.children: dict[str, Session] = {}  # Node workers attached through this one
        self.events: collections.deque[dict] = collections.deque()
        self.replies: dict[int, dict] = {}
        self.closed = False

    def send_nowait(self, method: str, params: dict | None = None, reply: bool = True) -> int:
        """Send a command; returns its id (use `result(id)` to wait for the reply, or pass
        reply=False to have the reply dropped when it comes)."""
        c = self.client
        with c._lock:
            c._next_id += 1
            mid = c._next_id
            msg: dict[str, Any] = {"id": mid, "method": method}
            if params:
                msg["params"] = params
            # Registered before it is sent: the reply may be read at once by another thread.
            c._pending[mid] = (self if reply else _DROP, method)
            try:
                self._route(msg)
            except BaseException:
                c._pending.pop(mid, None)
                raise
        return mid

    def _route(self, msg: dict) -> None:
        """Send a message addressed to this session."""
        c = self.client
        if self.session_id is None:
            c._send(msg)
        elif self.via_node_worker:
            # Node wraps worker traffic in its NodeWorker domain on the parent session
            # (a worker's own workers: wrapped once more per level).
            (self.parent or c.session)._send_to_worker(self.session_id, msg)
        else:
            msg["sessionId"] = self.session_id
            c._send(msg)

    def _send_to_worker(self, worker_session: str, msg: dict) -> None:
        c = self.client  # called under c._lock (from send_nowait)
        c._next_id += 1
        wrapper = {
            "id": c._next_id,
            "method": "NodeWorker.sendMessageToWorker",
            "params": {"sessionId": worker_session, "message": _dumps(msg)},
        }
        # The wrapper's own (empty) reply is not interesting; drop it when it comes.
        c._pending[c._next_id] = (_DROP, "NodeWorker.sendMessageToWorker")
        self._route(wrapper)

    def result(self, mid: int, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while mid not in self.replies:
            if self.closed:
                raise CDPClosed("the target closed before it answered")
            if time.monotonic() > deadline:
                raise CDPTimeout(f"no CDP reply within {timeout:g} s")
            self.client.pump(min(0.1, max(deadline - time.monotonic(), 0.001)))
        reply = self.replies.pop(mid)
        if "error" in reply:
            raise CDPError(reply.get("_method", "?"), reply["error"])
        return reply.get("result", {})

    def send(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        return self.result(self.send_nowait(method, params), timeout)

    def next_event(
        self, match: str | Callable[[dict], bool] | None = None, timeout: float = 30.0
    ) -> dict | None:
        """The first queued event matching (a method name or a predicate), waiting up to timeout."""
        pred = (lambda e: e["method"] == match) if isinstance(match, str) else match
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if pred is None or pred(e):
                    del self.events[i]
                    return e
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return None
            self.client.pump(min(0.1, left))


def _without_id(url: str) -> str:
    """An inspector's URL as said in a message: its host and port, not its path. The
    path's id is the only key to a Node inspector or a browser target (whoever has it can
    run code there), so it goes in no message, log or recording's meta."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "the given address"
    host = rest.split("/", 1)[0]
    return f"{scheme}://{host}" + ("/..." if "/" in rest.rstrip("/") else "")


class CDPClient:
    """A synchronous CDP connection (messages up to the WebSocket's limit, 1 GiB by default:
    a whole profile of an hour is some 20-40 MB; see websocket.py)."""

    def __init__(self, url: str, open_timeout: float = 10.0, connection: Any = None) -> None:
        # `connection`: anything with the WebSocket's send/recv(timeout)/close, e.g.
        # Chromium's debugging pipe (engines/cdp_pipe.py); then `url` is only a label.
        if connection is not None:
            self.ws = connection
        else:
            try:
                self.ws = WebSocket(url, open_timeout=open_timeout)
            except (OSError, TimeoutError) as e:
                raise EngineError(
                    f"cannot connect to the inspector at {_without_id(url)}: {e}"
                ) from None
        self._sock = getattr(self.ws, "socket", None)
        self._quickack()
        with contextlib.suppress(OSError, AttributeError):
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # type: ignore[union-attr]
        self._lock = threading.RLock()
        self._next_id = 0
        self._pending: dict[int, tuple[Session, str]] = {}
        self.session = Session(self, None, False)
        self.sessions: dict[str, Session] = {}
        self.closed = False
        # Replies to Profiler.stop on the root session kept as text (engines/_v8text.py),
        # read into columns when the track is made.
        self.raw_profiles = False
        # Root-session events the owner never reads, dropped unparsed: messages starting
        # with one of these texts (e.g. b'{"method":"Profiler.consoleProfileFinished"').
        self.unread: tuple[bytes, ...] = ()

    # -- low level
    def _quickack(self) -> None:
        """ACK at once. Node's inspector often writes an event then a reply: with Nagle on
        its side and delayed ACKs on ours, the reply waited ~40 ms (measured). Linux turns
        quick ACKs off again by itself, so this is repeated before each wait."""
        if _QUICKACK is not None and self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)

    def _send(self, msg: dict) -> None:
        try:
            self.ws.send(_dumps(msg))
        except ConnectionClosed:
            self._mark_closed()
            raise CDPClosed("the inspector connection closed") from None

    def _mark_closed(self) -> None:
        self.closed = True
        self.session.closed = True
        for s in self.sessions.values():
            s.closed = True
        stack = list(self.session.children.values())
        while stack:
            s = stack.pop()
            s.closed = True
            stack.extend(s.children.values())

    def attach(
        self, session_id: str, via_node_worker: bool = True, parent: Session | None = None
    ) -> Session:
        """A session for a target: a Node worker (attached through `parent`, default the
        root session) or, with via_node_worker=False, a flattened CDP session."""
        if not via_node_worker:
            s = Session(self, session_id, False)
            self.sessions[session_id] = s
            return s
        owner = parent or self.session
        s = Session(self, session_id, True, owner)
        owner.children[session_id] = s
        return s

    def pump(self, timeout: float = 0.1) -> bool:
        """Read and route whatever arrives within `timeout` s; False once the socket closed."""
        with self._lock:
            return self._pump(timeout)

    def _pump(self, timeout: float) -> bool:
        if self.closed:
            return False
        self._quickack()
        while True:
            try:
                raw = self._recv(timeout)
            except TimeoutError:
                return True
            except ConnectionClosed:
                self._mark_closed()
                return False
            if self.unread and raw.startswith(self.unread):
                timeout = 0
                continue
            msg = reply_with_profile(raw) if self.raw_profiles else None
            self._route(_loads(raw) if msg is None else msg)
            timeout = 0  # then drain what else is already there without waiting

    def _recv(self, timeout: float) -> bytes:
        try:
            return self.ws.recv(timeout=timeout)
        except MessageTooBig as e:
            # The connection is gone (the message's rest was never read): say why.
            self._mark_closed()
            raise EngineError(str(e)) from None

    def _route(self, msg: dict, session: Session | None = None) -> None:
        if session is None:
            sid = msg.get("sessionId")
            session = self.sessions.get(sid, self.session) if sid else self.session
        if "id" in msg:
            target = self._pending.pop(msg["id"], None)
            if target is None or target[0] is _DROP:
                return
            owner, method = target
            msg["_method"] = method
            owner.replies[msg["id"]] = msg
            return
        method = msg.get("method")
        # Worker session ids are only unique under their parent session.
        if method == "NodeWorker.receivedMessageFromWorker":
            p = msg["params"]
            child = session.children.get(p["sessionId"])
            if child is not None:
                # A worker's reply to Profiler.stop kept as text too (the main thread's is,
                # in _pump): its track is then made without numpy, as the main thread's.
                inner = p["message"]
                got = reply_with_profile(inner.encode()) if self.raw_profiles else None
                self._route(_loads(inner) if got is None else got, child)
            return
        if method == "NodeWorker.detachedFromWorker":
            child = session.children.get(msg["params"]["sessionId"])
            if child is not None:
                child.closed = True
        elif method == "Target.detachedFromTarget":
            # A flattened session's target went away (a page ended its worker): closed
            # now, as the event is read, not when its owner gets round to handling it
            # (the Chromium engine's pumps at the recording's end do not), so nothing
            # more is asked of it and `result` stops waiting for it.
            child = self.sessions.get(str((msg.get("params") or {}).get("sessionId")))
            if child is not None:
                child.closed = True
        session.events.append(msg)

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if not self.closed:
            try:
                self.ws.close()
            except Exception:  # noqa: BLE001 - closing a dead socket is not an error here
                pass
        self._mark_closed()

    def __enter__(self) -> CDPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Drop:
    replies: dict = {}


_DROP: Any = _Drop()
