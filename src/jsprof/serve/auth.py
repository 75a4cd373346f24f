"""Who may read: the read token (bearer header) or a signed dashboard session; the admin
token; throttling of wrong tokens; CSRF checks on the dashboard's form posts.

Routes call `require_read(request)` / `require_admin(request)` first; both raise a 401
`HTTPException` that the app answers as `{"error": ...}` JSON, or 429 when the client has
sent too many wrong tokens. Tokens are compared with `hmac.compare_digest`.

The dashboard's cookie never holds the read token: it is a session, `EXPIRY.NONCE.MAC`,
signed with a key derived from the read token (so every worker process checks it without
shared state, a restart keeps sessions, and a new read token ends them all), and it expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import sys
import threading
import time
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request

SESSION_COOKIE = "jsprof_session"  # HttpOnly, SameSite=Strict; set by the dashboard's sign-in
SIGNIN_COOKIE = "jsprof_signin"  # the sign-in form's CSRF nonce (double submit)
SESSION_S = 12 * 3600
SIGNIN_S = 3600


def _bearer(request: Request) -> str | None:
    value = request.headers.get("authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def token_matches(given: str | None, expected: str | None) -> bool:
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


# ---- sessions ----


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _key(read_token: str) -> bytes:
    return hmac.new(read_token.encode(), b"jsprof dashboard session v1", hashlib.sha256).digest()


def _mac(key: bytes, what: str) -> str:
    return _b64(hmac.new(key, what.encode(), hashlib.sha256).digest())


def new_session(read_token: str, now: float | None = None) -> str:
    expires = int((time.time() if now is None else now) + SESSION_S)
    body = f"{expires}.{secrets.token_urlsafe(16)}"
    return f"{body}.{_mac(_key(read_token), 'session.' + body)}"


def session_nonce(value: str | None, read_token: str, now: float | None = None) -> str | None:
    """The session's nonce when `value` is a session we signed and it has not expired."""
    if not value or not read_token or len(value) > 200:
        return None
    body, _, mac = value.rpartition(".")
    expires, _, nonce = body.partition(".")
    if not expires.isdigit() or not nonce:
        return None
    if not hmac.compare_digest(mac.encode(), _mac(_key(read_token), "session." + body).encode()):
        return None
    if int(expires) <= (time.time() if now is None else now):
        return None
    return nonce


def csrf_token(request: Request) -> str | None:
    """The CSRF token of the request's session (what the sign-out form must send back)."""
    token = request.app.state.config.read_token
    nonce = session_nonce(request.cookies.get(SESSION_COOKIE), token)
    return None if nonce is None else _mac(_key(token), "csrf." + nonce)


def same_origin_post(request: Request) -> bool:
    """A form post from a page of this collector, by what the browser says: Sec-Fetch-Site
    when it sends it, else Origin against Host. (A request with neither is not a browser's
    cross-site post; the CSRF token still has to match.)"""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("origin")
    if origin is None:
        return True
    if origin == "null":
        return False
    u = urlsplit(origin)
    host = request.headers.get("host", "")
    return u.netloc == host and u.scheme == request.url.scheme


# ---- throttling wrong tokens ----


class FailureThrottle:
    """Wrong tokens per client: a bucket of `burst` failures refilled at `per_s`; an empty
    bucket answers 429 (right or wrong token, so guessing learns nothing) until it refills.
    One stderr line per client each time it is throttled, without its address. Bounded:
    at most `max_clients` are tracked (the idle ones are forgotten first)."""

    def __init__(self, burst: int = 10, per_s: float = 10 / 60, max_clients: int = 10_000) -> None:
        self.burst = float(burst)
        self.per_s = per_s
        self.max_clients = max_clients
        self._clients: dict[str, tuple[float, float, bool]] = {}  # tokens, time, throttled
        self._lock = threading.Lock()

    def _level(self, client: str, now: float) -> tuple[float, bool]:
        tokens, last, throttled = self._clients.get(client, (self.burst, now, False))
        return min(self.burst, tokens + (now - last) * self.per_s), throttled

    def retry_after(self, client: str) -> int:
        """Seconds until this client may try again; 0 when it may now."""
        now = time.monotonic()
        with self._lock:
            if client not in self._clients:
                return 0
            tokens, _ = self._level(client, now)
            if tokens >= 1.0:
                return 0
            return max(1, int((1.0 - tokens) / self.per_s + 0.999))

    def failed(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            tokens, throttled = self._level(client, now)
            tokens = max(0.0, tokens - 1.0)
            starts = tokens < 1.0 and not throttled
            self._clients[client] = (tokens, now, tokens < 1.0)
            if len(self._clients) > self.max_clients:
                self._forget(now)
        if starts:
            print(
                f"jsprof serve: {int(self.burst)} wrong tokens from one client; answering it "
                "429 until it slows down",
                file=sys.stderr,
                flush=True,
            )

    def _forget(self, now: float) -> None:
        full = [c for c in self._clients if self._level(c, now)[0] >= self.burst]
        for c in full:
            del self._clients[c]
        while len(self._clients) > self.max_clients:  # all busy: the oldest go
            del self._clients[next(iter(self._clients))]


def client_key(request: Request) -> str:
    client = request.client
    return client.host if client is not None else "?"


def check_throttle(request: Request) -> None:
    throttle: FailureThrottle = request.app.state.auth_throttle
    wait = throttle.retry_after(client_key(request))
    if wait:
        raise HTTPException(
            429,
            f"too many wrong tokens from this client; retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )


def record_failure(request: Request) -> None:
    request.app.state.auth_throttle.failed(client_key(request))


# ---- the checks routes call ----


def has_read(request: Request) -> bool:
    """The request carries the read token or a valid session. A wrong bearer token counts
    against the client's throttle. A bad session cookie does not: it cannot be guessed (a
    MAC), and an expired one or one from before a new read token would otherwise lock a
    user out of the sign-in page."""
    expected = request.app.state.config.read_token
    bearer = _bearer(request)
    if bearer is not None:
        check_throttle(request)
        if token_matches(bearer, expected):
            return True
        record_failure(request)
        return False
    return session_nonce(request.cookies.get(SESSION_COOKIE), expected) is not None


def require_read(request: Request) -> None:
    """Raise 401 unless the request carries the read token (header) or a session."""
    if not has_read(request):
        raise HTTPException(
            401,
            "missing or wrong read token; send Authorization: Bearer <token> "
            "(printed by jsprof serve at start)",
            headers={"WWW-Authenticate": "Bearer"},
        )


def require_admin(request: Request) -> None:
    """Raise 401 unless the request carries the admin token (header only, never a cookie)."""
    expected = request.app.state.config.admin_token
    if not expected:
        raise HTTPException(
            401, "no admin token is configured; start jsprof serve with --admin-token-file"
        )
    check_throttle(request)
    if not token_matches(_bearer(request), expected):
        record_failure(request)
        raise HTTPException(
            401,
            "missing or wrong admin token; send Authorization: Bearer <admin token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
