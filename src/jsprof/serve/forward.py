"""`jsprof serve --forward URL`: every stored upload also pushed to an OTLP/HTTP profiles
endpoint (Pyroscope 2.x, an OpenTelemetry Collector, Elastic), as
`ExportProfilesServiceRequest` protobuf (`Content-Type: application/x-protobuf`).

Ingest never waits for it: an upload is handed over with `offer` (a put into a bounded
queue that never blocks; when the queue is full the upload is not forwarded, counted and
logged once). One thread per worker process takes uploads off the queue in batches (up to
`BATCH` uploads, or what arrived within `LINGER` seconds of the first), converts them
(formats/_otlp.py: one ResourceProfiles per upload, its app, release, env, route and
browser as resource attributes) and posts one request per batch. 429, 5xx and connection
errors are retried with growing waits (`RETRIES` times); another 4xx is the endpoint's final
word. The batch then goes, logged without the URL's query (which may hold a token).
"""

from __future__ import annotations

import logging
import queue
import threading
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger("jsprof.serve")

PATH = "/v1development/profiles"  # OTLP/HTTP's path for the profiles signal
BATCH = 64
LINGER = 1.0
QUEUE = 1000
RETRIES = 4
TIMEOUT = 10.0
_STOP = object()


def endpoint(url: str) -> str:
    """The URL posted to: `url` itself, or with OTLP's profiles path when it has no path."""
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"--forward {url[:200]!r}: expected an http(s)://HOST[:PORT][/PATH] URL")
    if u.path in ("", "/"):
        u = u._replace(path=PATH)
    return urlunsplit(u)


def shown(url: str) -> str:
    """The URL as logs show it: no query, no user info."""
    u = urlsplit(url)
    host = u.hostname or ""
    if u.port:
        host = f"{host}:{u.port}"
    return urlunsplit((u.scheme, host, u.path, "", ""))


class Forwarder:
    """The queue and the thread that posts its batches (see the module's notes)."""

    def __init__(self, url: str, batch: int = BATCH, linger: float = LINGER,
                 size: int = QUEUE, retries: int = RETRIES, timeout: float = TIMEOUT) -> None:
        self.url = endpoint(url)
        self.batch, self.linger, self.retries, self.timeout = batch, linger, retries, timeout
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=size)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="jsprof-forward", daemon=True)
        self.sent = self.failed = self.dropped = 0
        self._full_logged = False

    def start(self) -> None:
        self.thread.start()

    def offer(self, meta: dict, trace_json: bytes) -> bool:
        """Queue one stored upload; False (counted, logged once) when the queue is full."""
        try:
            self.queue.put_nowait((meta, trace_json))
            return True
        except queue.Full:
            self.dropped += 1
            if not self._full_logged:
                self._full_logged = True
                log.warning("forward to %s: queue full (%d uploads); uploads are stored but "
                            "not forwarded until it drains", shown(self.url), self.queue.maxsize)
            return False

    def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued (for up to `timeout` seconds), then end the thread."""
        self.stopping.set()
        try:
            self.queue.put(_STOP, timeout=timeout)
        except queue.Full:
            pass
        self.thread.join(timeout)

    # -- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is _STOP:
                return
            items = [item]
            stop = False
            while len(items) < self.batch:
                try:
                    nxt = self.queue.get(timeout=self.linger if not self.stopping.is_set()
                                         else 0.01)
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                items.append(nxt)
            try:
                self._send(items)
            except Exception as e:  # never let one bad batch end the thread
                self.failed += len(items)
                log.warning("forward to %s: %d uploads not forwarded (%s)", shown(self.url),
                            len(items), " ".join(str(e).split())[:200])
            if stop:
                return

    def _send(self, items: list[tuple[dict, bytes]]) -> None:
        body = payload(items)
        wait = 0.5
        for attempt in range(self.retries + 1):
            problem = post(self.url, body, self.timeout)
            if problem is None:
                self.sent += len(items)
                self._full_logged = False
                return
            final, why = problem
            if final or attempt == self.retries:
                raise RuntimeError(why)
            # a shutdown cuts the waits short, not the tries
            self.stopping.wait(wait if not self.stopping.is_set() else 0.05)
            wait *= 2


def payload(items: list[tuple[dict, bytes]]) -> bytes:
    """One ExportProfilesServiceRequest (the same fields as ProfilesData) for the uploads."""
    from ..formats import _otlp, read_any
    from ..trace import Recording
    from .document import trace_document

    tracks = []
    for meta, trace_json in items:
        rec = read_any(trace_document(meta, trace_json), "upload")
        tracks.extend(rec.tracks)
    return _otlp.to_message(Recording(tracks)).SerializeToString()


def post(url: str, body: bytes, timeout: float) -> tuple[bool, str] | None:
    """POST `body`; None when accepted, else (final, why): final for a 4xx but 429."""
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/x-protobuf", "User-Agent": "jsprof-serve"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
        return None
    except urllib.error.HTTPError as e:
        e.close()
        return (400 <= e.code < 500 and e.code != 429), f"HTTP {e.code}"
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        reason = getattr(e, "reason", e)
        return False, f"{type(reason).__name__}: {reason}"
