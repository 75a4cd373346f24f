"""The documentation site builds with `mkdocs build --strict` (a broken relative link, a
missing picture or a page left out of the nav fails the build, and so `make test`), and the
built site works offline, opened from disk (#36): every page in headless Chromium with every
request that is not file:// or loopback refused and recorded; none may be made, no console
error, every picture drawn, and search finds pages."""

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from browser_util import playwright_chromium

ROOT = Path(__file__).parent.parent
PAGES = {"index", "getting-started", "local-profiling", "budget", "engines", "profiler-api",
         "formats", "field", "scale", "store", "design"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stderr
    return out


def test_mkdocs_builds_strict(site):
    for page in PAGES:
        # page.html, not page/index.html: links work from file:// (use_directory_urls: false)
        assert (site / f"{page}.html").stat().st_size > 0, page


def _local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("file", "data", "blob", "about") or (
        parts.scheme in ("http", "https", "ws", "wss")
        and parts.hostname in ("127.0.0.1", "localhost", "::1"))


@pytest.mark.chromium
def test_site_works_offline_from_disk(site):
    # 404.html is a web server's page for a missing one (its links are from the root)
    pages = sorted(p for p in site.glob("*.html") if p.name != "404.html")
    assert {p.stem for p in pages} >= PAGES
    outside: list[str] = []
    errors: list[str] = []
    with playwright_chromium() as browser:
        ctx = browser.new_context()

        def route(r):
            if _local(r.request.url):
                r.continue_()
            else:  # recorded and refused: the site must not need it
                outside.append(r.request.url)
                r.abort()

        ctx.route("**/*", route)
        page = ctx.new_page()
        page.on("console", lambda m: m.type == "error" and errors.append(
            f"{page.url}: {m.text}"))
        page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
        for html in pages:
            page.goto(html.as_uri(), wait_until="load")
            # search's scripts are loaded (no Worker, no fetch: file:// refuses both)
            try:
                page.wait_for_selector("body[data-search-ready='1']", state="attached",
                                       timeout=30000)
            except Exception:
                raise AssertionError((html.name, outside, errors)) from None
            broken = page.evaluate(
                "[...document.images].filter(i => !(i.complete && i.naturalWidth > 0))"
                ".map(i => i.getAttribute('src'))")
            assert not broken, (html.name, broken)
            # every link to a page of the site names a file that is there
            for href in page.eval_on_selector_all(
                    "a[href]", "as => as.map(a => a.href)"):
                if href.startswith("file://"):
                    target = Path(urlsplit(href).path)
                    assert target.exists() and not target.is_dir(), (html.name, href)
        # Search, as a reader uses it: the search box, a word, a result to follow.
        page.goto((site / "index.html").as_uri())
        page.wait_for_selector("body[data-search-ready='1']", state="attached")
        page.keyboard.press("s")  # the theme's shortcut opens the search box
        page.wait_for_selector("#mkdocs-search-query", state="visible")
        page.fill("#mkdocs-search-query", "")
        page.type("#mkdocs-search-query", "sourcemap")
        page.wait_for_selector("#mkdocs-search-results article a")
        hits = page.eval_on_selector_all("#mkdocs-search-results article a",
                                         "as => as.map(a => a.href)")
        assert any("local-profiling.html" in h for h in hits), hits
        page.click("#mkdocs-search-results article a")
        page.wait_for_load_state("load")
        assert page.url.startswith((site / "").as_uri()), page.url
        assert re.search(r"source ?map", page.content(), re.I)
        # ?q= opens the search with the word in it
        page.goto((site / "field.html").as_uri() + "?q=dashboard")
        page.wait_for_selector("#mkdocs-search-results article a")
    assert not outside, outside
    assert not errors, errors


def test_every_view_has_its_picture():
    """Each tab of the flame page, and the dashboard's views, are shown in the docs by a
    picture `make docs-images` makes (tools/docs_images.py) from real recordings."""
    from jsprof.render.flame import VIEWS

    made = (ROOT / "tools" / "docs_images.py").read_text()
    local = (ROOT / "docs" / "local-profiling.md").read_text()
    field = (ROOT / "docs" / "field.md").read_text()
    for view, _label in VIEWS:
        picture = "flame.png" if view == "flame" else f"view-{view}.png"
        assert f"(images/{picture})" in local, picture
        assert picture.removesuffix(".png") in made, picture
        assert (ROOT / "docs" / "images" / picture).stat().st_size > 0
    for picture in ("dashboard.png", "dashboard-diff.png", "merged-time.png"):
        assert f"(images/{picture})" in field, picture
        assert picture.removesuffix(".png") in made, picture
