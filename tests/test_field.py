"""jsprof.field's middlewares on real servers on loopback (a Starlette app on uvicorn, a
WSGI app on wsgiref): only sampled sessions' HTML gets `Document-Policy: js-profiling`,
the decision is a cookie that keeps a session in or out, the share of sampled sessions is
the configured rate, and what the app set itself is kept."""

from __future__ import annotations

import math
import subprocess
import sys

import orjson
import pytest

from field_util import SERVERS, Fetcher, sample_cookie, values
from jsprof.errors import UsageError
from jsprof.field import Sampling

KINDS = sorted(SERVERS)


def _decided(lines: list[tuple[str, str]]) -> bool:
    """The decision a first response set (its cookie), checked against its header."""
    cookie = sample_cookie(lines)
    assert cookie is not None, lines
    assert cookie in (
        "jsprof_sample=1; Path=/; SameSite=Lax",
        "jsprof_sample=0; Path=/; SameSite=Lax",
    )
    sampled = cookie.startswith("jsprof_sample=1")
    policy = values(lines, "document-policy")
    assert policy == (["js-profiling"] if sampled else []), lines
    assert values(lines, "vary") == ["Cookie"], lines
    return sampled


@pytest.mark.parametrize("kind", KINDS)
def test_sampled_and_unsampled_sessions(kind: str) -> None:
    for rate, want in ((1.0, True), (0.0, False)):
        with SERVERS[kind](rate) as origin:
            f = Fetcher(origin)
            status, lines = f.get("/page")
            assert status == 200
            assert _decided(lines) is want
            # A session that has the cookie keeps its decision and is not told it again.
            cookie = f"jsprof_sample={int(want)}"
            status, lines = f.get("/page", cookie=f"a=b; {cookie}")
            assert sample_cookie(lines) is None
            assert values(lines, "document-policy") == (["js-profiling"] if want else [])
            f.close()


@pytest.mark.parametrize("kind", KINDS)
def test_sessions_are_sticky(kind: str) -> None:
    # At rate 0.5 a new draw per request would flip a session about every other page: a
    # session keeps its first answer for all its pages, whatever the rate would draw.
    seen = {True: 0, False: 0}
    with SERVERS[kind](0.5) as origin:
        f = Fetcher(origin)
        for _ in range(40):
            _, lines = f.get("/page")
            sampled = _decided(lines)
            seen[sampled] += 1
            jar = sample_cookie(lines).split(";", 1)[0]
            for path in ("/page", "/own-headers", "/page"):
                _, lines = f.get(path, cookie=f"theme=dark; {jar}")
                assert sample_cookie(lines) is None, lines
                has = any("js-profiling" in v for v in values(lines, "document-policy"))
                assert has is sampled, (path, lines)
        f.close()
    # 40 sessions at 0.5: both answers occur (all 40 alike: p = 2 * 0.5**40).
    assert seen[True] and seen[False], seen


@pytest.mark.parametrize("kind", KINDS)
def test_rate_over_many_sessions(kind: str) -> None:
    rate, n = 0.3, 1000
    with SERVERS[kind](rate) as origin:
        f = Fetcher(origin)
        sampled = sum(_decided(f.get("/page")[1]) for _ in range(n))
        f.close()
    # Binomial(1000, 0.3): mean 300, sd 14.5; outside 5 sd by chance with p < 1e-6.
    sd = math.sqrt(n * rate * (1 - rate))
    assert abs(sampled - n * rate) < 5 * sd, (sampled, n * rate, sd)


@pytest.mark.parametrize("kind", KINDS)
def test_only_documents_and_the_apps_own_headers(kind: str) -> None:
    with SERVERS[kind](1.0) as origin:
        f = Fetcher(origin)
        # Not a document: no policy, no cookie, no Vary (the decision waits for a page),
        # though the app still sees this request's draw.
        _, lines = f.get("/api")
        assert values(lines, "document-policy") == [] and sample_cookie(lines) is None
        assert values(lines, "vary") == []
        # The app's own Document-Policy is appended to (one line), its Vary and its other
        # cookies kept.
        _, lines = f.get("/own-headers")
        assert values(lines, "document-policy") == ["force-load-at-top, js-profiling"], lines
        assert values(lines, "vary") == ["Accept-Encoding, Cookie"], lines
        assert any(v.startswith("theme=dark") for v in values(lines, "set-cookie")), lines
        assert sample_cookie(lines) == "jsprof_sample=1; Path=/; SameSite=Lax"
        # An app that says js-profiling itself (here: off) is left as it is.
        _, lines = f.get("/own-profiling")
        assert values(lines, "document-policy") == ["js-profiling=?0"], lines
        f.close()
    with SERVERS[kind](0.0) as origin:
        f = Fetcher(origin)
        _, lines = f.get("/own-headers")
        assert values(lines, "document-policy") == ["force-load-at-top"], lines
        assert sample_cookie(lines) == "jsprof_sample=0; Path=/; SameSite=Lax"
        # An app that sets the cookie itself decides: this session is in, the rate says 0.
        _, lines = f.get("/forced")
        assert values(lines, "document-policy") == ["js-profiling"], lines
        assert sample_cookie(lines).startswith("jsprof_sample=1;"), lines  # the app's, alone
        f.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_app_sees_the_decision(kind: str) -> None:
    with SERVERS[kind](0.0) as origin:
        f = Fetcher(origin)
        for cookie, want in (("jsprof_sample=1", True), ("jsprof_sample=0", False), (None, False)):
            f.get("/api", cookie=cookie)
            assert orjson.loads(f.body) == {"sampled": want}, (cookie, f.body)
        f.close()


@pytest.mark.parametrize("kind", KINDS)
def test_cookie_attributes(kind: str) -> None:
    with SERVERS[kind](1.0, max_age=86400, path="/shop", same_site="Strict") as origin:
        f = Fetcher(origin)
        _, lines = f.get("/page")
        assert sample_cookie(lines) == "jsprof_sample=1; Path=/shop; Max-Age=86400; SameSite=Strict"
        # A value this rule never writes is decided again (and set again).
        _, lines = f.get("/page", cookie="jsprof_sample=yes")
        assert sample_cookie(lines).startswith("jsprof_sample=1")
        f.close()


def test_secure_follows_the_request_scheme() -> None:
    s = Sampling(0.5)
    assert s.set_cookie(True, https=True) == "jsprof_sample=1; Path=/; Secure; SameSite=Lax"
    assert s.set_cookie(False, https=False) == "jsprof_sample=0; Path=/; SameSite=Lax"
    assert "Secure" in Sampling(0.5, secure=True).set_cookie(True, https=False)
    assert "Secure" not in Sampling(0.5, secure=False).set_cookie(True, https=True)
    # SameSite=None without Secure is dropped by browsers: Secure even when the app sees
    # http (TLS ended at a proxy), else no session would keep its decision.
    cookie = Sampling(0.5, same_site="None").set_cookie(True, https=False)
    assert "SameSite=None" in cookie and "Secure" in cookie.split("; ")


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"rate": 1.5}, "rate must be a number from 0 to 1, got 1.5"),
        ({"rate": float("nan")}, "rate must be a number from 0 to 1"),
        ({"rate": True}, "rate must be a number from 0 to 1"),
        ({"rate": "0.1"}, "rate must be a number from 0 to 1"),
        ({"rate": 0.1, "cookie": "a b"}, "cookie must be a cookie name"),
        ({"rate": 0.1, "max_age": -1}, "max_age must be whole seconds"),
        ({"rate": 0.1, "path": "shop"}, "path must be a URL path"),
        ({"rate": 0.1, "path": "/shop\r\nX-Evil: 1"}, "path must be a URL path"),
        ({"rate": 0.1, "path": "/shop\x7f"}, "path must be a URL path"),
        ({"rate": 0.1, "path": "/\u5546\u5e97"}, "path must be a URL path"),  # not ASCII
        ({"rate": 0.1, "path": "/a;Domain=evil"}, "path must be a URL path"),
        ({"rate": 0.1, "same_site": "lax"}, "same_site must be 'Lax', 'Strict' or 'None'"),
        ({"rate": 0.1, "same_site": "None", "secure": False}, "needs a Secure cookie"),
        # Accepted before: a truthy string meant True, a non-callable failed per request.
        ({"rate": 0.1, "secure": "false"}, "secure must be None, True or False"),
        ({"rate": 0.1, "vary": "no"}, "vary must be True or False"),
        ({"rate": 0.1, "random": 0.5}, "random must be a function"),
    ],
)
def test_bad_options_say_what(kwargs: dict, says: str) -> None:
    with pytest.raises(UsageError) as e:
        Sampling(**kwargs)
    assert says in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("jsprof.field: ")


def test_light_with_the_core_install() -> None:
    # The middleware runs in the app's process with `pip install jsprof` alone: importing it
    # and answering a request must not need an extra's package, nor numpy.
    code = r"""
import sys
for m in ("numpy", "starlette", "uvicorn", "anyio", "orjson", "msgspec", "rich"):
    sys.modules[m] = None  # any import of these fails
from jsprof.field import WSGIMiddleware
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/html")])
    return [b"x"]
seen = []
mw = WSGIMiddleware(app, rate=1.0)
mw({"PATH_INFO": "/"}, lambda status, headers: seen.extend(headers))
assert ("Document-Policy", "js-profiling") in seen, seen
print(sorted(m for m in sys.modules if m.startswith("jsprof")))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['jsprof', 'jsprof.errors', 'jsprof.field']", r.stdout
