"""The dashboard at `/`: a sign-in form, then one static page that asks the query API.

Sign-in posts the read token in a form body; the answer sets a signed, expiring session
(never the token itself) as an HttpOnly, SameSite=Strict cookie and redirects, so the token
never appears in a URL, a cookie, a page or a script. Both form posts (sign-in and sign-out)
refuse cross-site posts: the browser's Sec-Fetch-Site/Origin must say same-origin and the
form's CSRF token must match (sign-in: a nonce also in a cookie; sign-out: one derived from
the session). The page (static/dashboard.*) is fixed markup plus one script file; everything
that came from traces reaches it as JSON and is put into the DOM as text
(`textContent`), never as markup, and the CSP allows only this origin's own script and
style files. The flame graphs are the renderer's own self-contained pages, in a frame.
"""

from __future__ import annotations

import html
import secrets
from importlib import resources
from urllib.parse import parse_qs

import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
MAX_FORM = 4096
STATIC = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}


def _static(name: str) -> bytes:
    return (resources.files("jsprof.serve") / "static" / name).read_bytes()


def _headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": CSP,
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }


def _signin_page(request: Request, message: str = "", status: int = 200) -> Response:
    from .auth import SIGNIN_COOKIE, SIGNIN_S

    # The form's CSRF nonce, also in a SameSite=Strict cookie: a cross-site page can
    # neither read it nor make the browser send it, so it cannot sign a victim in.
    nonce = request.cookies.get(SIGNIN_COOKIE)
    if not nonce or len(nonce) > 64 or not nonce.replace("-", "").replace("_", "").isalnum():
        nonce = secrets.token_urlsafe(16)
    note = f"<p class='err' role='alert'>{html.escape(message)}</p>" if message else ""
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'><title>jsprof · sign in</title>"
        "<link rel='stylesheet' href='/static/dashboard.css'></head><body class='signin'>"
        "<form method='post' action='/signin'><h1>jsprof</h1>"
        f"<input type='hidden' name='csrf' value='{html.escape(nonce)}'>"
        "<label>Read token <input type='password' name='token' id='token' "
        "autocomplete='current-password' required autofocus></label>"
        f"<button type='submit' id='signin'>Sign in</button>{note}"
        "<p class='hint'>The token <code>jsprof serve</code> printed at start "
        "(or the one in --read-token-file / JSPROF_READ_TOKEN).</p></form></body></html>"
    )
    resp = Response(
        doc, status_code=status, media_type="text/html; charset=utf-8", headers=_headers()
    )
    _set_cookie(resp, request, SIGNIN_COOKIE, nonce, SIGNIN_S, "/signin")
    return resp


def _set_cookie(
    resp: Response, request: Request, name: str, value: str, max_age: int, path: str
) -> None:
    """Every cookie of ours: out of scripts' reach, never sent cross-site, and over HTTPS
    only when the page came over HTTPS."""
    resp.set_cookie(
        name,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        path=path,
        secure=request.url.scheme == "https",
    )


async def index(request: Request) -> Response:
    from .auth import csrf_token, has_read

    if not has_read(request):
        return _signin_page(request)
    page = _static("dashboard.html")
    token = csrf_token(request) or ""
    # The sign-out form carries the session's CSRF token (a forced sign-out needs it).
    page = page.replace(b"{{csrf}}", html.escape(token).encode())
    return Response(page, media_type="text/html; charset=utf-8", headers=_headers())


async def _form(request: Request) -> dict[str, str] | None:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return None
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}


def _forbidden(request: Request, what: str) -> Response:
    return Response(
        orjson.dumps({"error": f"{what}: a cross-site or stale form post; reload the page"}),
        status_code=403,
        media_type="application/json",
        headers=_headers(),
    )


async def signin(request: Request) -> Response:
    from .auth import (
        SESSION_COOKIE,
        SESSION_S,
        SIGNIN_COOKIE,
        check_throttle,
        new_session,
        record_failure,
        same_origin_post,
        token_matches,
    )

    check_throttle(request)
    if not same_origin_post(request):
        return _forbidden(request, "/signin")
    form = await _form(request)
    if form is None:
        return _signin_page(request, "That form was too large.", 413)
    nonce = request.cookies.get(SIGNIN_COOKIE)
    if not token_matches(form.get("csrf"), nonce):
        return _forbidden(request, "/signin")
    read_token = request.app.state.config.read_token
    if not token_matches(form.get("token"), read_token):
        record_failure(request)
        return _signin_page(request, "Wrong token.", 401)
    resp = RedirectResponse("/", status_code=303, headers=_headers())
    _set_cookie(resp, request, SESSION_COOKIE, new_session(read_token), SESSION_S, "/")
    return resp


async def signout(request: Request) -> Response:
    from .auth import SESSION_COOKIE, csrf_token, same_origin_post, token_matches

    if not same_origin_post(request):
        return _forbidden(request, "/signout")
    form = await _form(request)
    if form is None or not token_matches(form.get("csrf"), csrf_token(request)):
        return _forbidden(request, "/signout")
    resp = RedirectResponse("/", status_code=303, headers=_headers())
    resp.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return resp


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    media = STATIC.get(name)
    if media is None:
        return Response(status_code=404)
    return Response(
        _static(name),
        media_type=media,
        headers={"Cache-Control": "no-cache", "Content-Security-Policy": CSP},
    )


async def favicon(request: Request) -> Response:
    return Response(status_code=204)


def routes() -> list[BaseRoute]:
    return [
        Route("/favicon.ico", favicon, methods=["GET"]),
        Route("/", index, methods=["GET"]),
        Route("/signin", signin, methods=["POST"]),
        Route("/signout", signout, methods=["POST"]),
        Route("/static/{name}", static, methods=["GET"]),
    ]
