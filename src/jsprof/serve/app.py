"""The collector's ASGI app (Starlette): ingest, read API, the browser client, and the
query and dashboard routes of `serve/query.py` and `serve/dashboard.py` when present.

Routes from other modules find what they need on `request.app.state`: `config` (a
`ServeConfig`) and `store` (the open `jsprof.store.Store`). They guard reads with
`jsprof.serve.auth.require_read(request)`.
"""

from __future__ import annotations

import errno
import functools
import gzip
import importlib
import importlib.resources
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..store import (
    RawRemoved,
    Store,
    StoreError,
    StoreFullError,
    StoreIOError,
    StoreUnavailable,
    is_url,
    open_store,
    retention,
)
from . import ingest
from .auth import FailureThrottle, require_read, token_matches
from .config import ServeConfig
from .document import trace_document
from .ingest import Refused
from .metrics import Metrics
from .metrics import routes as metrics_routes
from .ratelimit import RateLimiter

log = logging.getLogger("jsprof.serve")

_PREFLIGHT_HEADERS = "Content-Type, Content-Encoding, X-Jsprof-Key"
_JSON = "application/json"


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """The one shape of every 4xx/5xx answer: `{"error": "<one line>"}`."""
    return Response(
        orjson.dumps({"error": " ".join(str(message).split())}),
        status,
        headers=headers,
        media_type=_JSON,
    )


def _cors(config: ServeConfig, app_name: str | None, origin: str | None) -> dict[str, str]:
    if not origin or not app_name:
        return {}
    allowed = config.origins.get(app_name, ())
    if origin in allowed:
        return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
    if "*" in allowed:
        return {"Access-Control-Allow-Origin": "*"}
    return {}


async def _read_body(request: Request, cap: int) -> bytes:
    chunks = []
    n = 0
    async for chunk in request.stream():
        n += len(chunk)
        if n > cap:
            raise Refused(413, f"body is over the {cap} byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


# Parsing and validating a big body is CPU work under the GIL (small ones are done on the
# loop, see ingest.INLINE_MAX): more threads than this only add switching. Appends mostly
# wait in fsync and get the default (larger) thread pool, so the CPU threads go on parsing
# while a batch of appends shares one fsync.
CPU_THREADS = 1
# Queries run in threads of their own limiter, not the default one the appends use: a burst
# of dashboard queries can never take the threads that ingest waits for. Two at a time:
# their Python work shares the GIL with the event loop.
QUERY_THREADS = 2


class _Failed:
    """What a worker-thread step gives back instead of raising.

    An exception raised in a worker thread reaches the event loop through anyio's Future,
    and its traceback and that Future point at each other: every refused upload's raw and
    inflated bodies (64 MiB for one 71 KB gzip bomb) stayed alive until a full GC. The
    thread turns the exception into this plain value, so nothing of a refused request
    outlives it.
    """

    __slots__ = ("status", "message", "headers")

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.message = message
        self.headers = headers or {}


def _unavailable(exc: BaseException) -> str | None:
    """The store's condition when `exc` says the store cannot take writes for now (its
    typed `StoreUnavailable` anywhere in the chain, or a raw ENOSPC/EDQUOT): "disk full",
    "disk I/O error", ...; None for any other failure (a bug: 500)."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 8:
        if isinstance(e, StoreUnavailable):
            return e.condition
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreFullError.condition
        e = e.__cause__ or e.__context__
        seen += 1
    return None


_once_lock = threading.Lock()
_logged: set[str] = set()


def log_once(condition: str, message: str) -> None:
    """One stderr line per condition (disk full, a client throttled), not one per request:
    a condition that lasts does not fill the log."""
    with _once_lock:
        if condition in _logged:
            return
        _logged.add(condition)
    print(f"jsprof serve: {message}", file=sys.stderr, flush=True)


def clear_logged(condition: str) -> None:
    with _once_lock:
        _logged.discard(condition)


def _guarded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run `fn` (in a worker thread); exceptions come back as a `_Failed` value."""
    try:
        return fn(*args, **kwargs)
    except Refused as e:
        return _Failed(e.status, e.message)
    except Exception as e:  # noqa: BLE001 - reported as a value, never re-raised
        condition = _unavailable(e)
        if condition is not None:
            # Nothing of this upload was stored, and the same request can succeed later
            # (space or the disk comes back): 503 with Retry-After, and one log line per
            # condition while it lasts, not a traceback per request.
            if condition == StoreFullError.condition:
                log_once(condition, f"the store's disk is full ({e}); answering 503 until it "
                         "is not")
                msg = "the collector's disk is full; retry later"
            else:
                log_once(condition, f"the store cannot be written: {condition} ({e}); "
                         "answering 503 until it can")
                msg = f"the collector cannot write its store ({condition}); retry later"
            return _Failed(503, msg, {"Retry-After": "30"})
        log.error("jsprof serve: %s failed: %r", getattr(fn, "__name__", fn), e, exc_info=True)
        return _Failed(500, "internal error; see the collector's stderr")


async def in_thread(
    fn: Callable[..., Any], *args: Any, limiter: anyio.CapacityLimiter | None = None, **kw: Any
) -> Any:
    """`fn(*args, **kw)` in a worker thread; a `_Failed` instead of an exception."""
    return await anyio.to_thread.run_sync(
        functools.partial(_guarded, fn, *args, **kw), limiter=limiter
    )


def _append(
    store: Store, upload_id: str, meta: dict, trace_json: bytes, gzipped: bytes | None
) -> bool:
    stored = store.append(upload_id, meta, trace_json, gzipped=gzipped)
    if stored:
        # The store takes writes again: say so again the next time it cannot.
        for condition in (StoreFullError.condition, StoreIOError.condition,
                          StoreUnavailable.condition):
            clear_logged(condition)
    return stored


async def post_trace(request: Request) -> Response:
    t0 = time.perf_counter()
    request.state.body_bytes = 0
    request.state.duplicate = False
    status = 500
    try:
        resp = await _post_trace(request)
        status = resp.status_code
        return resp
    finally:
        metrics = request.app.state.metrics
        if metrics is not None:
            app_name = request.query_params.get("app")
            metrics.upload(status, time.perf_counter() - t0, app_name,
                           request.state.body_bytes, request.state.duplicate)


async def _post_trace(request: Request) -> Response:
    config: ServeConfig = request.app.state.config
    q = request.query_params
    app_name = q.get("app")
    origin = request.headers.get("origin")
    cors = _cors(config, app_name, origin)
    try:
        if not app_name:
            raise Refused(400, "query parameter app: missing; POST /v1/traces?app=NAME")
        expected = config.apps.get(app_name)
        if expected is None:
            raise Refused(401, f"query parameter app: unknown app {app_name[:64]!r}")
        if origin is not None and not cors:
            # A page of another origin: the client's text/plain bodies (beacons, keepalive
            # requests) need no CORS preflight, so the browser no longer stops them before
            # they come; --allow-origin is the list of pages that may upload, checked here.
            # (curl and `jsprof upload` send no Origin.)
            raise Refused(
                403,
                f"origin {origin[:200]!r} may not upload for app {app_name!r}; start jsprof "
                f"serve with --allow-origin {app_name}=ORIGIN",
            )
        key = request.headers.get("x-jsprof-key") or q.get("key")
        if not token_matches(key, expected):
            raise Refused(
                401, f"missing or wrong ingest key for app {app_name!r}; send X-Jsprof-Key or &key="
            )
        upload_id = ingest.check_upload_id(q.get("id"))
        limiter: RateLimiter | None = request.app.state.limiter
        if limiter is not None and not limiter.allow(app_name):
            raise Refused(429, f"app {app_name!r} is over its rate limit; retry later")
        ingest.check_content_type(request.headers.get("content-type"))
        encoding = ingest.check_encoding(request.headers.get("content-encoding"))
        ingest.check_length(request.headers.get("content-length"), config.limits)
        raw = await _read_body(request, config.limits.max_body)
        request.state.body_bytes = len(raw)
    except Refused as e:
        return _refused(e.status, e.message, cors)
    except ClientDisconnect:
        return Response(status_code=499)
    params = {k: q.get(k) for k in ("app", "release", "route", "env")}
    args = (raw, encoding, params, request.headers.get("user-agent"))
    got = None
    state = request.app.state
    if ingest.says_small(raw, encoding) and time.monotonic() >= state.inline_free_at:
        # On the loop: a field upload is ~5 ms of work, less than the hand-off costs. At
        # most half the loop's time goes to it (after a parse of d seconds here, uploads
        # of the next d seconds go to the thread), so accepting connections and reading
        # requests never wait behind a run of parses.
        t0 = time.monotonic()
        got = _guarded(ingest.prepare_small, *args, config.limits, config.keep_query)
        t1 = time.monotonic()
        state.inline_free_at = t1 + (t1 - t0)
    if got is None:
        got = await in_thread(
            ingest.prepare,
            *args,
            config.limits,
            config.keep_query,
            limiter=request.app.state.cpu_limiter,
        )
    del raw, args  # the inflated body and the parse are the thread's; the raw body goes now too
    if isinstance(got, _Failed):
        return _refused(got.status, got.message, cors, got.headers)
    meta, trace_json, gzipped = got
    upload_id = upload_id or str(uuid.uuid4())
    store: Store = request.app.state.store
    stored = await in_thread(_append, store, upload_id, meta, trace_json, gzipped)
    if isinstance(stored, _Failed):
        return _refused(stored.status, stored.message, cors, stored.headers)
    forwarder = getattr(request.app.state, "forwarder", None)
    if stored is True and forwarder is not None:
        forwarder.offer(meta, trace_json)  # a put that never waits
    if not stored:
        request.state.duplicate = True
        # A repeated id: the same upload (a client's retry) is answered as the first time;
        # a different one under that id is a conflict, not silently dropped.
        same = await in_thread(_same_upload, store, upload_id, trace_json, gzipped)
        if isinstance(same, _Failed):
            return _refused(same.status, same.message, cors, same.headers)
        if not same:
            return _refused(
                409,
                f"id {upload_id!r} is stored already with a different trace; "
                "send a new id for a new upload",
                cors,
            )
    return Response(orjson.dumps({"id": upload_id}), 202, headers=cors, media_type=_JSON)


def _same_upload(store: Store, upload_id: str, trace_json: bytes, gzipped: bytes | None) -> bool:
    try:
        got = store.get(upload_id)
    except RawRemoved:
        return True  # stored and compacted: a retry, answered as the first time
    except StoreError as e:
        # The stored copy cannot be read to compare: a retry is answered as the first
        # upload was (the damage is the store's to report, not this client's).
        log_once(f"damaged:{upload_id}", f"upload {upload_id!r} is damaged on disk: {e}")
        return True
    if got is None:  # pruned meanwhile: nothing to disagree with
        return True
    if trace_json is None and gzipped is not None:
        trace_json = gzip.decompress(gzipped)
    if got[1] == trace_json:
        return True
    # Stored through the other path (a collector before an upgrade re-encoded it): the
    # same trace is still the same upload.
    try:
        return orjson.loads(got[1]) == orjson.loads(trace_json)
    except orjson.JSONDecodeError:  # pragma: no cover - both were read as JSON before
        return False


def _refused(
    status: int, message: str, cors: dict[str, str], extra: dict[str, str] | None = None
) -> Response:
    headers = dict(cors)
    if status == 429:
        headers["Retry-After"] = "1"
    headers.update(extra or {})
    return error(status, message, headers)


async def preflight_traces(request: Request) -> Response:
    config: ServeConfig = request.app.state.config
    cors = _cors(config, request.query_params.get("app"), request.headers.get("origin"))
    if not cors:
        return error(403, "origin not allowed for this app; start jsprof serve with --allow-origin")
    cors.update(
        {
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": _PREFLIGHT_HEADERS,
            "Access-Control-Max-Age": "86400",
        }
    )
    return Response(status_code=204, headers=cors)


def _get(store: Store, upload_id: str) -> tuple[dict, bytes] | None | _Failed:
    try:
        return store.get(upload_id)
    except RawRemoved:
        return _Failed(
            410,
            f"upload {upload_id[:128]!r} is compacted and its raw trace was removed by the "
            "collector's raw retention (--keep-raw); the fleet queries still count it",
        )
    except StoreError as e:
        # Damage on disk (a record failing its checksum) is not the reader's fault and no
        # retry will mend it: say what it is, once per id, instead of a generic 500.
        log_once(f"damaged:{upload_id}", f"upload {upload_id!r} is damaged on disk: {e}")
        return _Failed(
            410,
            f"upload {upload_id[:128]!r} is stored but damaged on disk (its checksum fails); "
            "it cannot be read back (jsprof serve check --store reports such records)",
        )


async def get_trace(request: Request) -> Response:
    require_read(request)
    upload_id = request.path_params["id"]
    got = await in_thread(_get, request.app.state.store, upload_id)
    if isinstance(got, _Failed):
        return error(got.status, got.message, got.headers)
    if got is None:
        return error(404, f"no upload with id {upload_id[:128]!r}")
    meta, trace_json = got
    return Response(trace_document(meta, trace_json), media_type=_JSON)


_CLIENT_JS: bytes | None = None


async def client_js(request: Request) -> Response:
    global _CLIENT_JS
    if _CLIENT_JS is None:
        _CLIENT_JS = (
            importlib.resources.files("jsprof").joinpath("js/jsprof-client.js").read_bytes()
        )
    return Response(
        _CLIENT_JS,
        media_type="text/javascript; charset=utf-8",
        headers={
            "Access-Control-Allow-Origin": "*",
            "Cross-Origin-Resource-Policy": "cross-origin",
            "Cache-Control": "public, max-age=300",
        },
    )


def _optional_routes() -> list[BaseRoute]:
    """The query API and dashboard (fleet's modules), when they are installed."""
    routes: list[BaseRoute] = []
    for name in ("query", "dashboard"):
        modname = f"jsprof.serve.{name}"
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name == modname:
                continue
            raise
        routes.extend(mod.routes())
    return routes


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error(exc.status_code, exc.detail, getattr(exc, "headers", None))


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("jsprof serve: %s %s failed: %r", request.method, request.url.path, exc)
    return error(500, "internal error; see the collector's stderr")


class _Headers:
    """nosniff on every answer, and the opt-in access log (never the client's address)."""

    def __init__(self, app: ASGIApp, access_log: bool) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [
                    (b"x-content-type-options", b"nosniff")
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except ClientDisconnect:
            status = status or 499  # gone before its answer: nothing to send
        except Exception as e:
            # Answered here, not by Starlette's outer error middleware, so the access log
            # and the nosniff header see the 500 (the log said "status 0").
            # With its traceback: a 500 is a bug, and where it was raised is what finds it
            log.error("jsprof serve: %s %s failed: %r", scope["method"], scope["path"], e,
                      exc_info=True)
            if status:
                raise  # the answer had started: nothing more can be sent
            msg = error(500, "internal error; see the collector's stderr")
            await msg(scope, receive, send_wrapper)
        finally:
            if self.access_log:
                ms = (time.perf_counter() - start) * 1000
                # The path only: query strings carry keys and ids.
                print(
                    f"jsprof serve: {scope['method']} {scope['path']} {status} {ms:.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )


class _Retention:
    def __init__(self, store: Store, seconds: float) -> None:
        self.store = store
        self.seconds = seconds
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="jsprof-retention", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                res = retention.prune(self.store, time.time() * 1000 - self.seconds * 1000)
                if res.removed:
                    print(
                        f"jsprof serve: retention removed {res.removed} uploads",
                        file=sys.stderr,
                        flush=True,
                    )
            except Exception as e:  # noqa: BLE001 - a failed prune must not stop ingest
                log.error("jsprof serve: retention prune failed: %s", e)
            self.stop.wait(3600)


def create_app(config: ServeConfig, store: Store | None = None) -> Starlette:
    """The collector app. Without `store`, it opens `config.store` at start-up."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.cpu_limiter = anyio.CapacityLimiter(CPU_THREADS)
        own = app.state.store is None
        if own:
            app.state.store = open_store(config.store)
        app.state.query_limiter = anyio.CapacityLimiter(QUERY_THREADS)
        retention = None
        if config.retention_s and os.environ.get("JSPROF_SERVE_WORKER", "0") == "0" \
                and not is_url(config.store):  # a bucket's: its compactor's (objprune.py)
            retention = _Retention(app.state.store, config.retention_s)
            retention.thread.start()
        compactor = None
        if config.compact_every > 0 and is_url(config.store):
            from ..store.objstore import CompactorProcess

            # One per collector (its first worker); the bucket's lease picks which one of
            # them, on any machine, compacts.
            compactor = None
            if os.environ.get("JSPROF_SERVE_WORKER", "0") == "0":
                compactor = CompactorProcess(config.store, config.compact_every,
                                             keep_raw=config.keep_raw_s,
                                             retention=config.retention_s,
                                             restart=config.compactor_restart_s)
                compactor.start()
        elif config.compact_every > 0:
            from ..store.background import BackgroundCompactor

            # Every worker takes part; one holds the store's lease and runs the compactor
            # process, another takes over if it dies.
            compactor = BackgroundCompactor(app.state.store.path, config.compact_every,
                                            keep_raw=config.keep_raw_s,
                                            restart=config.compactor_restart_s)
            compactor.start()
        app.state.compactor = compactor
        forwarder = None
        if config.forward:
            from .forward import Forwarder

            forwarder = Forwarder(config.forward)
            forwarder.start()
        app.state.forwarder = forwarder
        try:
            yield
        finally:
            if forwarder is not None:
                forwarder.stop()
            if compactor is not None:
                compactor.stop()
            if retention is not None:
                retention.stop.set()
            if own:
                app.state.store.close()

    routes: list[BaseRoute] = [
        Route("/v1/traces", post_trace, methods=["POST"]),
        Route("/v1/traces", preflight_traces, methods=["OPTIONS"]),
        Route("/v1/traces/{id}", get_trace, methods=["GET"]),
        Route("/v1/client.js", client_js, methods=["GET"]),
        *metrics_routes(),
        *_optional_routes(),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.config = config
    app.state.store = store
    app.state.limiter = RateLimiter(config.rate_limit) if config.rate_limit else None
    app.state.auth_throttle = FailureThrottle()
    app.state.inline_free_at = 0.0
    app.state.metrics = Metrics(config.apps)
    app.add_middleware(_Headers, access_log=config.access_log)
    return app
