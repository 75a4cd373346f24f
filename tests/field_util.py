"""Real servers on loopback for jsprof.field's tests: a Starlette app on uvicorn (ASGI) and
a plain WSGI app on wsgiref, each behind the sampling middleware, and an HTTP client that
keeps every Set-Cookie line."""

from __future__ import annotations

import http.client
import threading
import time
import wsgiref.simple_server
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from jsprof.field import ASGIMiddleware, WSGIMiddleware

# The page's body: `%(body)s` is filled by the test (the browser tests put the client in).
DEFAULT_BODY = "<!doctype html><title>field</title><p>hello"


def _asgi_app(body: str) -> Starlette:
    async def page(request: Request) -> Response:
        return HTMLResponse(body)

    async def api(request: Request) -> Response:
        # The decision as the app sees it (scope["state"]).
        return JSONResponse({"sampled": request.state.jsprof_sampled})

    async def own_headers(request: Request) -> Response:
        r = HTMLResponse(body, headers={"Document-Policy": "force-load-at-top"})
        r.headers.append("Vary", "Accept-Encoding")
        r.set_cookie("theme", "dark")
        return r

    async def own_profiling(request: Request) -> Response:
        return HTMLResponse(body, headers={"Document-Policy": "js-profiling=?0"})

    async def forced(request: Request) -> Response:
        r = HTMLResponse(body)
        r.set_cookie("jsprof_sample", "1")  # the app puts this session in the sample
        return r

    return Starlette(
        routes=[
            Route("/page", page),
            Route("/api", api),
            Route("/own-headers", own_headers),
            Route("/own-profiling", own_profiling),
            Route("/forced", forced),
        ]
    )


def _wsgi_app(body: str) -> Callable[..., Iterable[bytes]]:
    data = body.encode()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ["PATH_INFO"]
        html = [("Content-Type", "text/html; charset=utf-8")]
        if path == "/page":
            start_response("200 OK", html)
            return [data]
        if path == "/api":
            # The decision as the app sees it (none without the middleware: behind nginx).
            said = environ.get("jsprof.sampled")
            out = b'{"sampled": %s}' % {True: b"true", False: b"false", None: b"null"}[said]
            start_response("200 OK", [("Content-Type", "application/json")])
            return [out]
        if path == "/own-headers":
            start_response(
                "200 OK",
                [
                    *html,
                    ("Document-Policy", "force-load-at-top"),
                    ("Vary", "Accept-Encoding"),
                    ("Set-Cookie", "theme=dark; Path=/"),
                ],
            )
            return [data]
        if path == "/own-profiling":
            start_response("200 OK", [*html, ("Document-Policy", "js-profiling=?0")])
            return [data]
        if path == "/forced":
            start_response("200 OK", [*html, ("Set-Cookie", "jsprof_sample=1; Path=/")])
            return [data]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found"]

    return app


class _QuietHandler(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def asgi_server(rate: float, body: str = DEFAULT_BODY, **options: Any) -> Iterator[str]:
    """A Starlette app behind ASGIMiddleware on uvicorn (its own thread); yields its origin.
    Added as docs/field.md says (Starlette's add_middleware)."""
    app = _asgi_app(body)
    app.add_middleware(ASGIMiddleware, rate=rate, **options)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert t.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(timeout=30)


@contextmanager
def wsgi_server(rate: float | None, body: str = DEFAULT_BODY, **options: Any) -> Iterator[str]:
    """A WSGI app behind WSGIMiddleware on wsgiref (its own thread); yields its origin.
    With rate None, the app alone (what nginx proxies to)."""
    app = _wsgi_app(body)
    if rate is not None:
        app = WSGIMiddleware(app, rate=rate, **options)
    server = wsgiref.simple_server.make_server("127.0.0.1", 0, app, handler_class=_QuietHandler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=30)


SERVERS = {"asgi": asgi_server, "wsgi": wsgi_server}


class Fetcher:
    """GETs on one origin over one keep-alive connection where the server keeps it."""

    def __init__(self, origin: str) -> None:
        u = urlsplit(origin)
        self.host, self.port = u.hostname, u.port
        self.conn: http.client.HTTPConnection | None = None
        self.body = b""

    def get(self, path: str, cookie: str | None = None) -> tuple[int, list[tuple[str, str]]]:
        """(status, every header line with its name lower-cased); the body in `self.body`."""
        headers = {"Cookie": cookie} if cookie else {}
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.request("GET", path, headers=headers)
                r = self.conn.getresponse()
                self.body = r.read()
            except (http.client.RemoteDisconnected, ConnectionError, BrokenPipeError):
                self.close()  # wsgiref closes after each response: open a new one
                if attempt:
                    raise
                continue
            lines = [(k.lower(), v) for k, v in r.getheaders()]
            if r.will_close:
                self.close()
            return r.status, lines
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def values(lines: list[tuple[str, str]], name: str) -> list[str]:
    return [v for k, v in lines if k == name]


def sample_cookie(lines: list[tuple[str, str]]) -> str | None:
    """The jsprof_sample cookie's Set-Cookie line, or None when the response set none."""
    mine = [v for v in values(lines, "set-cookie") if v.startswith("jsprof_sample=")]
    assert len(mine) <= 1, mine
    return mine[0] if mine else None
