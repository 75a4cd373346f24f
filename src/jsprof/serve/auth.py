"""Who may read: the read token (bearer header or the dashboard's cookie) and the admin token.

Routes call `require_read(request)` / `require_admin(request)` first; both raise a 401
`HTTPException` that the app answers as `{"error": ...}` JSON. Tokens are compared with
`hmac.compare_digest` (constant time in the token's content).
"""

from __future__ import annotations

import hmac

from starlette.exceptions import HTTPException
from starlette.requests import Request

READ_COOKIE = "jsprof_read"  # HttpOnly, SameSite=Strict; set by the dashboard's sign-in


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


def has_read(request: Request) -> bool:
    expected = request.app.state.config.read_token
    return token_matches(_bearer(request), expected) or token_matches(
        request.cookies.get(READ_COOKIE), expected
    )


def require_read(request: Request) -> None:
    """Raise 401 unless the request carries the read token (header or cookie)."""
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
            401, "no admin token is configured; start jsprof serve with --admin-token"
        )
    if not token_matches(_bearer(request), expected):
        raise HTTPException(
            401,
            "missing or wrong admin token; send Authorization: Bearer <admin token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
