"""The dashboard at `/`: a sign-in form, then one static page that asks the query API.

Sign-in posts the read token in a form body; the answer sets it as an HttpOnly,
SameSite=Strict cookie and redirects, so the token never appears in a URL, a page or a
script. The page (static/dashboard.*) is fixed markup plus one script file; everything
that came from traces reaches it as JSON and is put into the DOM as text
(`textContent`), never as markup, and the CSP allows only this origin's own script and
style files. The flame graphs are the renderer's own self-contained pages, in a frame.
"""

from __future__ import annotations

import html
from importlib import resources
from urllib.parse import parse_qs

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


def _signin_page(message: str = "", status: int = 200) -> Response:
    note = f"<p class='err' role='alert'>{html.escape(message)}</p>" if message else ""
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'><title>jsprof · sign in</title>"
        "<link rel='stylesheet' href='/static/dashboard.css'></head><body class='signin'>"
        "<form method='post' action='/signin'><h1>jsprof</h1>"
        "<label>Read token <input type='password' name='token' id='token' "
        "autocomplete='current-password' required autofocus></label>"
        f"<button type='submit' id='signin'>Sign in</button>{note}"
        "<p class='hint'>The token <code>jsprof serve</code> printed at start "
        "(or --read-token / JSPROF_READ_TOKEN).</p></form></body></html>"
    )
    return Response(
        doc, status_code=status, media_type="text/html; charset=utf-8", headers=_headers()
    )


async def index(request: Request) -> Response:
    from .auth import has_read

    if not has_read(request):
        return _signin_page()
    return Response(
        _static("dashboard.html"), media_type="text/html; charset=utf-8", headers=_headers()
    )


async def signin(request: Request) -> Response:
    from .auth import READ_COOKIE, token_matches

    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return _signin_page("That form was too large.", 413)
    token = (parse_qs(body.decode("utf-8", "replace")).get("token") or [""])[0]
    if not token_matches(token, request.app.state.config.read_token):
        return _signin_page("Wrong token.", 401)
    resp = RedirectResponse("/", status_code=303, headers=_headers())
    resp.set_cookie(
        READ_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return resp


async def signout(request: Request) -> Response:
    from .auth import READ_COOKIE

    resp = RedirectResponse("/", status_code=303, headers=_headers())
    resp.delete_cookie(READ_COOKIE, path="/", httponly=True, samesite="strict")
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
