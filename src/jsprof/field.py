"""Sampled field profiling on the server: `Document-Policy: js-profiling` only for the
sessions in the sample.

The header costs every page that gets it, profiled or not (Chromium prepares V8's profiler
for each such document), so sending it to every visitor to profile 1 % of them makes the
other 99 % pay for nothing. These middlewares decide per browser session, on the server:

    from jsprof.field import ASGIMiddleware, WSGIMiddleware
    app = ASGIMiddleware(app, rate=0.01)     # Starlette: add_middleware(ASGIMiddleware, rate=0.01)
    application = WSGIMiddleware(application, rate=0.01)

The decision is a cookie (`jsprof_sample=1` or `=0`), drawn at the session's first HTML
response and kept after it, so every page of a session is in or out (sticky). An HTML
response of a sampled session gets `Document-Policy: js-profiling` (appended to the
app's own Document-Policy, never replacing it); others get nothing more than the cookie.

The client learns the decision from the same cookie, so it is readable by scripts (not
HttpOnly): a page cannot read its own response headers, and a `<meta>` would mean
rewriting the app's HTML. `jsprof-client.js` reads it (`sampleCookie`, default
`jsprof_sample`): `0` and it neither makes nor tries a Profiler. The cookie is no secret:
a user who sets it to 1 only profiles their own pages.

Stdlib only (it runs in the app's process, with the core install): no jsprof module
beyond `errors`, no numpy, no Starlette.
"""

from __future__ import annotations

import math
import random as _random
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from .errors import UsageError

COOKIE = "jsprof_sample"
POLICY = "js-profiling"
# The scope/environ key (ASGI: scope["state"][STATE_KEY]; WSGI: environ[ENVIRON_KEY]) where
# the app can read the decision of the request it is answering (e.g. to print it).
STATE_KEY = "jsprof_sampled"
ENVIRON_KEY = "jsprof.sampled"

# RFC 6265 cookie-name: an RFC 7230 token.
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# The media types a document is: the only responses a Document-Policy applies to.
_DOCUMENT_TYPES = ("text/html", "application/xhtml+xml")

Headers = list[tuple[str, str]]


class Sampling:
    """One sampling rule: the rate, the cookie and its attributes; what both middlewares
    (and anything else that answers HTTP) ask per request and per response.

    `rate` is the share of sessions sampled (0 to 1). The cookie lives for the browser
    session unless `max_age` (seconds) says longer; `secure=None` marks it Secure on
    HTTPS requests only (always with same_site="None", which browsers keep only when
    Secure). `vary` adds `Vary: Cookie` to the HTML responses it decides on,
    since their headers depend on the cookie: a shared cache must not give one session's
    page (its Document-Policy, its Set-Cookie) to another. `random` draws from [0, 1).
    """

    def __init__(
        self,
        rate: float,
        *,
        cookie: str = COOKIE,
        max_age: int | None = None,
        path: str = "/",
        secure: bool | None = None,
        same_site: str = "Lax",
        vary: bool = True,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if (
            isinstance(rate, bool)
            or not isinstance(rate, int | float)
            or not math.isfinite(rate)
            or not 0 <= rate <= 1
        ):
            raise UsageError(f"jsprof.field: rate must be a number from 0 to 1, got {rate!r}")
        if not isinstance(cookie, str) or not _TOKEN.match(cookie):
            raise UsageError(
                f"jsprof.field: cookie must be a cookie name (a token), got {cookie!r}"
            )
        if max_age is not None and (
            isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0
        ):
            raise UsageError(
                f"jsprof.field: max_age must be whole seconds >= 0 or None, got {max_age!r}"
            )
        if (
            not isinstance(path, str)
            or not path.startswith("/")
            # RFC 6265 path-value: US-ASCII but controls and `;` (anything else is a header
            # that cannot be written: latin-1 fails per response, DEL and CR/LF inject)
            or re.search(r"[^\x20-\x3a\x3c-\x7e]", path)
        ):
            raise UsageError(f"jsprof.field: path must be a URL path such as '/', got {path!r}")
        if same_site not in ("Lax", "Strict", "None"):
            raise UsageError(
                f"jsprof.field: same_site must be 'Lax', 'Strict' or 'None', got {same_site!r}"
            )
        if same_site == "None" and secure is False:
            raise UsageError(
                "jsprof.field: same_site='None' needs a Secure cookie (secure=None or True)"
            )
        # A string here ("yes", "false") is truthy: it would silently pick the opposite of
        # what a config file meant, and a non-callable `random` failed on every request.
        if secure not in (None, True, False):
            raise UsageError(f"jsprof.field: secure must be None, True or False, got {secure!r}")
        if vary not in (True, False):
            raise UsageError(f"jsprof.field: vary must be True or False, got {vary!r}")
        if not callable(random):
            raise UsageError(
                f"jsprof.field: random must be a function giving a number in [0, 1), "
                f"got {random!r}"
            )
        self.rate = float(rate)
        self.cookie = cookie
        self.max_age = max_age
        self.path = path
        self.secure = secure
        self.same_site = same_site
        self.vary = vary
        self.random = random

    # -- the request: what the browser's cookie says -------------------------------------

    def from_cookie(self, cookie_headers: Iterable[str]) -> bool | None:
        """The session's decision from its Cookie header(s), or None when it has none (or
        one this rule did not write: decided again)."""
        for header in cookie_headers:
            for part in header.split(";"):
                name, eq, value = part.strip().partition("=")
                if eq and name == self.cookie:
                    # The first one wins: browsers send the most specific path first.
                    value = value.strip().strip('"')
                    return {"1": True, "0": False}.get(value)
        return None

    def decide(self, cookie_headers: Iterable[str]) -> tuple[bool, bool]:
        """(sampled, fresh): the session's decision, `fresh` when drawn now (the response
        must set the cookie)."""
        known = self.from_cookie(cookie_headers)
        if known is not None:
            return known, False
        # random() < rate: 0 never, 1 always (random() < 1).
        return self.random() < self.rate, True

    # -- the response -----------------------------------------------------------------------

    def set_cookie(self, sampled: bool, https: bool) -> str:
        """The Set-Cookie value that keeps the decision for the session."""
        parts = [f"{self.cookie}={'1' if sampled else '0'}", f"Path={self.path}"]
        if self.max_age is not None:
            parts.append(f"Max-Age={self.max_age}")
        # SameSite=None is dropped by browsers unless Secure; behind a TLS-terminating
        # proxy the app sees http, so secure=None must not leave it off then.
        if self.secure or (self.secure is None and (https or self.same_site == "None")):
            parts.append("Secure")
        parts.append(f"SameSite={self.same_site}")
        return "; ".join(parts)

    def headers(self, headers: Headers, sampled: bool, fresh: bool, https: bool) -> Headers:
        """The response's headers with the decision applied: the same list when it is not
        a document (only documents take a Document-Policy and the cookie), else a new one
        with the cookie (when `fresh`), `Document-Policy: js-profiling` added to the app's
        own (when sampled) and `Vary: Cookie`. What the app set is kept: its own cookie of
        this name is the decision (an app may force a session in or out), its own
        js-profiling entry in Document-Policy stays as it is."""
        ctype = ""
        for name, value in headers:
            if name.lower() == "content-type":
                ctype = value
        if ctype.split(";", 1)[0].strip().lower() not in _DOCUMENT_TYPES:
            return headers
        out: Headers = []
        policies: list[str] = []
        varies: list[str] = []
        app_decision: bool | None = None
        for name, value in headers:
            low = name.lower()
            if low == "document-policy":
                policies.append(value)
                continue
            if low == "vary":
                varies.append(value)
                continue
            if low == "set-cookie":
                mine = self._cookie_value(value)
                if mine is not None:
                    app_decision = mine
            out.append((name, value))
        if app_decision is not None:
            sampled, fresh = app_decision, False
        elif fresh:
            out.append(("Set-Cookie", self.set_cookie(sampled, https)))
        policy = _merge_policy(policies, sampled)
        if policy:
            out.append(("Document-Policy", policy))
        vary = _merge_vary(varies, "Cookie" if self.vary else None)
        if vary:
            out.append(("Vary", vary))
        return out

    def _cookie_value(self, set_cookie: str) -> bool | None:
        name, eq, rest = set_cookie.partition("=")
        if not eq or name.strip() != self.cookie:
            return None
        return {"1": True, "0": False}.get(rest.split(";", 1)[0].strip().strip('"'))


def _has_profiling(policy: str) -> bool:
    # A Document-Policy is a structured dictionary: `key`, `key=value`, `key;param`,
    # entries separated by commas. The app's own js-profiling entry (even `=?0`) is left be.
    return re.search(r"(^|,)\s*js-profiling\s*($|[=;,])", policy) is not None


def _merge_policy(policies: list[str], sampled: bool) -> str:
    # One field line: the app's entries first, then ours. (Several lines of a dictionary
    # field mean the same joined by commas, but one line leaves nothing to a proxy's or
    # browser's way of joining them.)
    kept = [p.strip() for p in policies if p.strip()]
    joined = ", ".join(kept)
    if sampled and not _has_profiling(joined):
        return f"{joined}, {POLICY}" if joined else POLICY
    return joined


def _merge_vary(varies: list[str], add: str | None) -> str:
    fields = [f.strip() for v in varies for f in v.split(",") if f.strip()]
    if add and not any(f == "*" or f.lower() == add.lower() for f in fields):
        fields.append(add)
    return ", ".join(fields)


def _sampling(rate: float | Sampling, options: dict[str, Any]) -> Sampling:
    if isinstance(rate, Sampling):
        if options:
            raise UsageError("jsprof.field: give a Sampling or a rate with options, not both")
        return rate
    return Sampling(rate, **options)


ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[..., Any]], Any
]


class ASGIMiddleware:
    """Sampled `Document-Policy: js-profiling` for an ASGI app (Starlette, FastAPI,
    Django's ASGI handler, ...). `rate` is the share of sessions sampled, or a `Sampling`;
    other keyword options are `Sampling`'s. The decision is in `scope["state"]
    ["jsprof_sampled"]` (Starlette: `request.state.jsprof_sampled`)."""

    def __init__(self, app: ASGIApp, rate: float | Sampling, **options: Any) -> None:
        self.app = app
        self.sampling = _sampling(rate, options)

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope.get("type") != "http":  # websocket, lifespan: nothing to decide
            await self.app(scope, receive, send)
            return
        rule = self.sampling
        cookies = [
            v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"cookie"
        ]
        sampled, fresh = rule.decide(cookies)
        https = scope.get("scheme") == "https"
        scope = dict(scope)
        scope["state"] = dict(scope.get("state") or {}, **{STATE_KEY: sampled})

        async def send_decided(message: MutableMapping[str, Any]) -> None:
            if message.get("type") == "http.response.start":
                raw = message.get("headers") or ()
                pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]
                new = rule.headers(pairs, sampled, fresh, https)
                if new is not pairs:
                    message = dict(message)
                    message["headers"] = [
                        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in new
                    ]
            await send(message)

        await self.app(scope, receive, send_decided)


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class WSGIMiddleware:
    """Sampled `Document-Policy: js-profiling` for a WSGI app (Flask, Django, ...). `rate`
    is the share of sessions sampled, or a `Sampling`; other keyword options are
    `Sampling`'s. The decision is in `environ["jsprof.sampled"]`."""

    def __init__(self, app: WSGIApp, rate: float | Sampling, **options: Any) -> None:
        self.app = app
        self.sampling = _sampling(rate, options)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        rule = self.sampling
        cookie = environ.get("HTTP_COOKIE")
        sampled, fresh = rule.decide([cookie] if cookie else [])
        https = environ.get("wsgi.url_scheme") == "https"
        environ[ENVIRON_KEY] = sampled

        def start_decided(status: str, headers: Headers, exc_info: Any = None) -> Any:
            new = rule.headers(list(headers), sampled, fresh, https)
            if exc_info is not None:
                return start_response(status, new, exc_info)
            return start_response(status, new)

        return self.app(environ, start_decided)
