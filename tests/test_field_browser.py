"""jsprof.field end to end in real headless Chromium: pages served through the ASGI and the
WSGI middleware load the real client from a real `jsprof serve`. A sampled session's page
gets the header, profiles and uploads a trace the collector stores; an unsampled one's
client makes no Profiler (nor tries: the rate it is given would say yes) and sends
nothing; a session keeps its decision from page to page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import orjson
import pytest

from browser_util import open_page, playwright_chromium
from field_util import SERVERS
from serve_util import Collector

# The page's client is told the opposite of what the server decides (sampleRate 0 when it
# samples, 1 when not), so what happens is the server's decision, read from its cookie.
PAGE = """<!doctype html>
<meta charset="utf-8"><title>jsprof field</title>
<script type="module">
import {startProfiling} from "%(collector)s/v1/client.js";
function hotFunctionForJsprof(ms) {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) for (let i = 0; i < 2000; i++) x += Math.sqrt(i * x + 1);
  return x;
}
window.run = async (sampleRate) => {
  const p = startProfiling({endpoint: "%(collector)s", app: "shop", key: "k1",
                            release: "field", sampleRate, timeline: false});
  const out = {enabled: p.enabled, reason: p.reason, sampledBy: p.sampledBy, ids: []};
  if (p.enabled) {
    hotFunctionForJsprof(400);
    out.ids = await p.stop();
  }
  out.profilers = window.__profilersMade;
  return out;
};
window.ready = true;
</script>
"""

# Counts every `new Profiler(...)` the page makes (or tries), before any page script runs.
COUNT_PROFILERS = """
window.__profilersMade = 0;
if (typeof window.Profiler === "function") {
  window.Profiler = new Proxy(window.Profiler, {
    construct(target, args, newTarget) {
      window.__profilersMade++;
      return Reflect.construct(target, args, newTarget);
    },
  });
}
"""


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, Collector]]:
    """(kind, rate) -> origin for the ASGI and WSGI servers at rates 1 and 0, and the
    collector their pages upload to."""
    ports = {}
    # The pages need the collector's URL before their servers start, so the collector lets
    # any origin in (the servers' ports are not known yet).
    store = tmp_path_factory.mktemp("field") / "store"
    col = Collector(store, "--app", "shop:k1", "--allow-origin", "shop=*")
    body = PAGE % {"collector": col.url}
    with ExitStack() as stack:
        for kind in SERVERS:
            for rate in (1.0, 0.0):
                ports[kind, rate] = stack.enter_context(SERVERS[kind](rate, body=body))
        yield ports, col
    col.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_chromium() as b:
        yield b


def _visit(context: object, url: str, sample_rate: int, uploads: list[str]) -> tuple[dict, dict]:
    """Open `url` in `context`, run the client; (what it says, the document's headers)."""
    page = context.new_page()
    page.on(
        "request",
        lambda r: uploads.append(r.url) if r.method == "POST" and "/v1/traces" in r.url else None,
    )
    response = page.goto(url)
    page.wait_for_function("window.ready === true", timeout=15000)
    res = page.evaluate(f"run({sample_rate})")
    headers = response.all_headers()
    page.close()
    return res, headers


@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_sampled_session_profiles_and_uploads(sites, browser, kind: str) -> None:
    origins, col = sites
    context = browser.new_context()
    context.add_init_script(COUNT_PROFILERS)
    uploads: list[str] = []
    res, headers = _visit(context, f"{origins[kind, 1.0]}/page", 0, uploads)
    assert headers.get("document-policy") == "js-profiling", headers
    assert "jsprof_sample=1" in headers.get("set-cookie", ""), headers
    assert res["enabled"] and res["sampledBy"] == "cookie" and res["reason"] is None, res
    assert res["profilers"] >= 1 and len(res["ids"]) >= 1, res
    names = set()
    for upload_id in res["ids"]:
        doc = orjson.loads(col.wait_stored(upload_id)[0])
        assert doc["jsprof"]["meta"]["route"] == "/page"
        names |= {f["name"] for f in doc["frames"]}
    assert "hotFunctionForJsprof" in names, names
    assert len(uploads) == len(res["ids"]), uploads
    # The next page of the session: the browser sends the cookie back, the server keeps the
    # decision without setting it again, and the client profiles again.
    res, headers = _visit(context, f"{origins[kind, 1.0]}/page", 0, uploads)
    assert headers.get("document-policy") == "js-profiling" and "set-cookie" not in headers
    assert res["enabled"] and res["profilers"] >= 1, res
    context.close()


@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_unsampled_session_makes_no_profiler_and_sends_nothing(sites, browser, kind) -> None:
    origins, col = sites
    context = browser.new_context()
    context.add_init_script(COUNT_PROFILERS)
    uploads: list[str] = []
    for _ in range(2):  # the first page (cookie set) and the next (cookie sent back)
        res, headers = _visit(context, f"{origins[kind, 0.0]}/page", 1, uploads)
        assert "document-policy" not in headers, headers
        assert res == {
            "enabled": False,
            "reason": "not-sampled",
            "sampledBy": "cookie",
            "ids": [],
            "profilers": 0,
        }, res
    assert uploads == []
    assert [c["value"] for c in context.cookies() if c["name"] == "jsprof_sample"] == ["0"]
    context.close()


def test_the_counter_sees_a_profiler(sites, browser) -> None:
    # The count above is 0 because none was made, not because the counter misses them: with
    # no cookie the client follows sampleRate 1, tries, and the counter sees it (refused:
    # this page has no header).
    origins, col = sites
    context = browser.new_context()
    context.add_init_script(COUNT_PROFILERS)
    page = open_page(context, f"{origins['wsgi', 0.0]}/page")
    context.clear_cookies()
    res = page.evaluate("run(1)")
    page.close()
    context.close()
    assert res["sampledBy"] == "rate" and res["reason"] == "document-policy", res
    assert res["profilers"] == 1, res
