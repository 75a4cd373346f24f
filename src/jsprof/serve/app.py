"""The collector's ASGI app (Starlette): ingest, read API, the browser client, and the
query and dashboard routes of `serve/query.py` and `serve/dashboard.py` when present.

Routes from other modules find what they need on `request.app.state`: `config` (a
`ServeConfig`) and `store` (the open `jsprof.store.Store`). They guard reads with
`jsprof.serve.auth.require_read(request)`.
"""

from __future__ import annotations

import importlib
import importlib.resources
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..store import Store
from . import ingest
from .auth import require_read, token_matches
from .config import ServeConfig
from .ingest import Refused
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


# Parsing and validating is CPU work under the GIL: more threads than this only add
# switching. Appends mostly wait in fsync and get the default (larger) thread pool, so the
# CPU threads go on parsing while a batch of appends shares one fsync.
CPU_THREADS = 1


async def post_trace(request: Request) -> Response:
    config: ServeConfig = request.app.state.config
    q = request.query_params
    app_name = q.get("app")
    cors = _cors(config, app_name, request.headers.get("origin"))
    try:
        if not app_name:
            raise Refused(400, "query parameter app: missing; POST /v1/traces?app=NAME")
        expected = config.apps.get(app_name)
        if expected is None:
            raise Refused(401, f"query parameter app: unknown app {app_name[:64]!r}")
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
        params = {k: q.get(k) for k in ("app", "release", "route", "env")}
        meta, trace_json, gzipped = await anyio.to_thread.run_sync(
            ingest.prepare,
            raw,
            encoding,
            params,
            request.headers.get("user-agent"),
            config.limits,
            config.keep_query,
            limiter=request.app.state.cpu_limiter,
        )
        upload_id = upload_id or str(uuid.uuid4())
        store: Store = request.app.state.store
        # False for a repeated id: answered the same as the first time.
        await run_in_threadpool(store.append, upload_id, meta, trace_json, gzipped=gzipped)
    except Refused as e:
        headers = dict(cors)
        if e.status == 429:
            headers["Retry-After"] = "1"
        return error(e.status, e.message, headers)
    except ClientDisconnect:
        return Response(status_code=499)
    return Response(orjson.dumps({"id": upload_id}), 202, headers=cors, media_type=_JSON)


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


def trace_document(meta: dict, trace_json: bytes) -> bytes:
    """jsprof's JSON for a stored upload: the trace bytes as stored plus a `jsprof` key.

    The stored JSON is spliced, not re-encoded, so timestamps come back bit for bit.
    """
    ext: dict[str, Any] = {"formatVersion": 1, "track": "main"}
    origin = meta.get("timeOrigin")
    ext["timeOrigin"] = origin if type(origin) in (int, float) else None  # unknown
    interval = meta.get("sampleInterval")
    if type(interval) in (int, float):
        ext["sampleInterval"] = interval
    ext["meta"] = meta
    body = trace_json.rstrip()
    if not body.endswith(b"}"):  # pragma: no cover - the store only holds JSON objects
        raise ValueError("stored trace is not a JSON object")
    head = body[:-1].rstrip()
    sep = b"" if head.endswith(b"{") else b","
    return b"".join((head, sep, b'"jsprof":', orjson.dumps(ext), b"}"))


async def get_trace(request: Request) -> Response:
    require_read(request)
    upload_id = request.path_params["id"]
    got = await run_in_threadpool(request.app.state.store.get, upload_id)
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
                res = self.store.prune(time.time() * 1000 - self.seconds * 1000)
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
            app.state.store = Store(config.store)
        retention = None
        if config.retention_s and os.environ.get("JSPROF_SERVE_WORKER", "0") == "0":
            retention = _Retention(app.state.store, config.retention_s)
            retention.thread.start()
        try:
            yield
        finally:
            if retention is not None:
                retention.stop.set()
            if own:
                app.state.store.close()

    routes: list[BaseRoute] = [
        Route("/v1/traces", post_trace, methods=["POST"]),
        Route("/v1/traces", preflight_traces, methods=["OPTIONS"]),
        Route("/v1/traces/{id}", get_trace, methods=["GET"]),
        Route("/v1/client.js", client_js, methods=["GET"]),
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
    app.add_middleware(_Headers, access_log=config.access_log)
    return app
