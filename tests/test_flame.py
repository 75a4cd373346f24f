"""Flame graphs: layout and escaping from the file, and rendering in real headless Chromium.

Chromium is required, never skipped: `make test` installs it (Debian package `chromium`).
"""

import base64
import html
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from browser_util import chromium_path, playwright_chromium
from jsprof import io
from jsprof.analysis.calltree import build_call_tree
from jsprof.analysis.diff import tree_changes
from jsprof.cli import main
from jsprof.engines.chromium.browser import HEADLESS_FLAGS
from jsprof.render.flame import (
    ROW,
    VIEWER_MODULES,
    flame_script,
    render_flame,
    script_json,
)
from jsprof.trace import Recording, TraceBuilder
from viewer_util import open_page, record_app, record_log, wait

SVG_NS = "{http://www.w3.org/2000/svg}"
XSS_SCRIPT = "</script><img src=x onerror=alert(1)>"
XSS_ATTR = '"><svg onload=alert(1)>'
# Variants whose effect would be visible in the dumped DOM if they ever ran.
XSS_TITLE = "</script><img src=x onerror=\"document.title='pwned'\">"
XSS_MARK = "\"><svg onload=\"document.body.setAttribute('data-pwned','1')\">"
ODD = "line\u2028sep\u2029para & <b> ]]> \x01ctl"


def _basic(data):
    return build_call_tree(io.load(data / "chromium" / "trace-basic.json"))


def _rec(stacks, resources=None):
    """One sample per ms; stacks are lists of names, outermost first."""
    b = TraceBuilder()
    res = resources or {}
    for i, names in enumerate(stacks):
        ids = [b.frame_id(n, b.resource_id(res.get(n, "file:///app.js")), 1, 1) for n in names]
        b.add_sample(float(i), b.stack_id(ids))
    return Recording.of(b.build(), sample_interval=1.0)


def _xss_tree():
    stacks = [["main", XSS_SCRIPT], ["main", XSS_ATTR], ["main", XSS_TITLE, XSS_MARK]] * 3
    stacks += [["main", ODD]] * 3
    return build_call_tree(_rec(stacks))


def _frames(svg_root):
    """(title text, rect attributes) per frame group of a parsed SVG."""
    out = []
    for g in svg_root.iter(SVG_NS + "g"):
        if "data-i" in g.attrib:
            out.append((g.find(SVG_NS + "title").text, g.find(SVG_NS + "rect").attrib))
    return out


# ---- from the file ---------------------------------------------------------------------


def test_svg_of_fixture_is_valid_xml_with_every_function(data):
    tree = _basic(data)
    root = ET.fromstring(render_flame(tree, "svg", title="basic"))
    frames = _frames(root)
    titles = [t.split("\n")[0] for t, _ in frames]
    assert titles[0] == "all"
    for name in ("busyLoop", "fib", "extWork", "extInner", "set scale", "get perimeter", "area"):
        assert name in titles
    # Tooltips carry location, total and self.
    busy = next(t for t, _ in frames if t.startswith("busyLoop\n"))
    assert "page.html?exp=basic:14:18" in busy and "total " in busy and "self " in busy
    # The root spans the drawing; a child is never wider than the whole.
    root_w = float(frames[0][1]["width"])
    assert root_w == pytest.approx(1200 - 20, abs=1)
    assert all(float(r["width"]) <= root_w for _, r in frames)


def test_flame_and_icicle_put_the_root_at_opposite_ends(data):
    tree = _basic(data)
    flame = _frames(ET.fromstring(render_flame(tree, "svg")))
    icicle = _frames(ET.fromstring(render_flame(tree, "svg", icicle=True)))
    depth = max(int(float(r["y"])) for _, r in icicle) // ROW
    assert float(icicle[0][1]["y"]) == 0
    assert float(flame[0][1]["y"]) == depth * ROW
    assert len(flame) == len(icicle)


def test_colour_by_resource_and_by_function(data):
    def fills(color_by):
        frames = _frames(ET.fromstring(render_flame(_basic(data), "svg", color_by=color_by)))
        return {t.split("\n")[0]: r["fill"] for t, r in frames}

    def hue(fill):
        return int(re.match(r"hsl\((-?\d+),", fill).group(1))

    by_res = fills("resource")
    # page.html is the first (orange) family, workload-ext.js the second (blue).
    assert abs(hue(by_res["busyLoop"]) - hue(by_res["fib"])) <= 14
    assert abs(hue(by_res["extWork"]) - hue(by_res["busyLoop"])) > 100
    by_fn = fills("function")
    assert all(0 <= hue(by_fn[n]) <= 60 for n in ("busyLoop", "fib", "extWork"))


def test_untrusted_names_are_escaped_everywhere():
    tree = _xss_tree()
    for fmt in ("svg", "html"):
        doc = render_flame(tree, fmt, title=XSS_SCRIPT, subtitle=XSS_ATTR)
        for raw in (XSS_SCRIPT, XSS_ATTR, XSS_TITLE, XSS_MARK, "<img", "<b>"):
            assert raw not in doc, (fmt, raw)
        # The JSON blocks (the HTML page has the viewer's model and the tree's index too)
        # and the scripts (the page's modules before its own), nothing else.
        assert doc.count("</script>") == (4 + len(VIEWER_MODULES) if fmt == "html" else 2)
        # The JSON blocks hold the names, escaped for a <script> element.
        for bid, key in (("fg-data", "names"), ("fg-model", "fname"), ("fg-index", "fname")):
            if fmt == "svg" and bid != "fg-data":
                continue
            block = re.search(rf'id="{bid}">(.*?)</script>', doc, re.S).group(1)
            assert "<" not in block and ">" not in block and "&" not in block
            assert "\u2028" not in block and "\u2029" not in block
            assert XSS_SCRIPT in json.loads(block)[key]
    # The SVG is well-formed XML and the names read back exactly as text.
    titles = [t.split("\n")[0] for t, _ in _frames(ET.fromstring(render_flame(tree, "svg")))]
    for name in (XSS_SCRIPT, XSS_ATTR, XSS_TITLE, XSS_MARK):
        assert name in titles
    assert ODD.replace("\x01", "\ufffd") in titles  # XML cannot hold U+0001 at all


def test_script_json_escapes():
    s = script_json({"n": "</script>&\u2028\u2029"})
    assert s == '{"n":"\\u003c/script\\u003e\\u0026\\u2028\\u2029"}'
    assert json.loads(s) == {"n": "</script>&\u2028\u2029"}


def test_self_contained_no_external_urls(data):
    for fmt in ("svg", "html"):
        doc = render_flame(_basic(data), fmt)
        # Resource URLs appear as text (names, tooltips), never as something to fetch.
        assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", doc, re.I)
        assert "<link" not in doc and "@import" not in doc and "url(" not in doc
    assert "default-src 'none'" in render_flame(_basic(data), "html")


def test_narrow_nodes_are_pruned_so_files_stay_small():
    # One hot function and 20,000 distinct one-sample callees far below a pixel.
    b = TraceBuilder()
    r = b.resource_id("file:///big.js")
    main_f = b.frame_id("main", r, 1, 1)
    hot = b.stack_id([main_f, b.frame_id("hot", r, 2, 1)])
    t = 0.0
    for i in range(20000):
        b.add_sample(t, b.stack_id([main_f, b.frame_id(f"tiny{i}", r, 3 + i, 1)]))
        t += 1.0
    b.add_sample(t, hot)
    b.add_sample(t + 1e7, hot)  # the hot sample stands for 10,000 s
    tree = build_call_tree(Recording.of(b.build(), sample_interval=1.0))
    assert len(tree.parent) == 20002
    doc = render_flame(tree, "html")
    frames = re.search(r'id="fg-data">(.*?)</script>', doc).group(1)
    assert len(frames) < 2_000 and "tiny17" not in frames
    assert "tiny17" not in doc.split("<script")[0]  # not drawn
    # The page keeps the whole tree for search shares and zoom as binary columns and one
    # name and location per function (here every node is a function of its own): under
    # 64 bytes a node, where a drawn frame is hundreds.
    assert len(doc) < 60_000 + 64 * 20002
    kept = render_flame(tree, "svg", min_width_px=0)
    assert "tiny17" in kept


def test_differential_colours_red_for_growth_blue_for_shrink():
    base = _rec([["main", "a"]] * 8 + [["main", "b"]] * 2)
    new = _rec([["main", "a"]] * 2 + [["main", "b"]] * 8)
    tree = build_call_tree(new)
    doc = render_flame(tree, "svg", change=tree_changes(build_call_tree(base), tree))
    fills = {t.split("\n")[0]: r["fill"] for t, r in _frames(ET.fromstring(doc))}
    assert fills["b"].startswith("hsl(2,85%")  # full red: the largest growth
    assert fills["a"].startswith("hsl(215,85%")  # full blue
    assert fills["main"].endswith(",96%)")  # no self time on either side: neutral


def test_cli_flame(data, tmp_path, capsys):
    out = tmp_path / "f.svg"
    trace = str(data / "chromium" / "trace-basic.json")
    assert main(["flame", trace, "-o", str(out), "--icicle", "--color-by", "function"]) == 0
    assert "busyLoop" in out.read_text()
    assert main(["flame", trace, "-o", str(tmp_path / "f.png")]) == 2
    assert "use one of those" in capsys.readouterr().err
    assert main(["flame", trace, "-o", str(tmp_path / "f.html"), "--track", "nope"]) == 2
    assert not (tmp_path / "f.html").exists()


# ---- in headless Chromium ------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_path()  # missing, it fails with what to do


def _chromium(exe: str, tmp: Path, url: str, *mode: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.iterdir()))}"
    cmd = [
        exe,
        *HEADLESS_FLAGS,
        f"--user-data-dir={profile}",
        "--virtual-time-budget=3000",  # let the page's script run before the dump
        *mode,
        url,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


def _dom(exe: str, tmp: Path, url: str) -> str:
    return _chromium(exe, tmp, url, "--dump-dom").stdout


def test_chromium_renders_the_fixture(chromium, data, tmp_path):
    page = tmp_path / "flame.html"
    tree = _basic(data)
    page.write_text(render_flame(tree, "html", title="trace-basic.json"), encoding="utf-8")

    dom = _dom(chromium, tmp_path, page.as_uri() + "#q=fib")
    assert 'data-ready="1"' in dom  # the script ran
    for name in ("busyLoop", "extWork", "arrowWork", "set scale", "fib"):
        assert name in dom
    # The search found fib and reported its share (18.4% of this fixture).
    status = re.search(r'id="fg-status">([^<]*)<', dom).group(1)
    assert re.search(r"\d+ functions?, 18\.4 % of samples \([\d.]+ ms; \d+ frames", status), status
    # The graph is drawn on the canvas (68 frames of this fixture), the matches in it.
    cv = re.search(r'<canvas id="fg-canvas"[^>]*>', dom).group(0)
    assert int(re.search(r'data-frames="(\d+)"', cv).group(1)) == 68, cv
    assert int(re.search(r'data-hits="(\d+)"', cv).group(1)) > 3, cv

    png = tmp_path / "shot.png"
    _chromium(chromium, tmp_path, page.as_uri(), f"--screenshot={png}", "--window-size=1280,600")
    img = Image.open(png).convert("RGB")
    assert img.size == (1280, 600)
    colours = img.getcolors(maxcolors=1 << 20)
    background = max(colours)[1]
    painted = sum(n for n, c in colours if c != background)
    assert len(colours) > 50, "screenshot has too few colours: blank or unstyled"
    assert painted > 0.08 * img.size[0] * img.size[1], "too few non-background pixels"
    # The frame fills (orange family for page.html) are really on screen.
    assert sum(n for n, (r, g, b) in colours if r > 180 and 110 < g < 190 and b < 140) > 5000


def test_chromium_svg_zooms_by_link(chromium, data, tmp_path):
    svg = tmp_path / "flame.svg"
    svg.write_text(render_flame(_basic(data), "svg"), encoding="utf-8")
    # Zoom into frame 3 (workload): its ancestors stay, drawn full width and faded.
    dom = _dom(chromium, tmp_path, svg.as_uri() + "#z=3")
    assert 'data-ready="1"' in dom and 'class="fg-anc"' in dom


def test_chromium_does_not_run_injected_names(chromium, tmp_path):
    page = tmp_path / "xss.html"
    page.write_text(render_flame(_xss_tree(), "html", title=XSS_TITLE), encoding="utf-8")
    dom = _dom(chromium, tmp_path, page.as_uri() + "#q=" + "%3C%2Fscript")
    assert 'data-ready="1"' in dom
    # Had an injected handler run, the title would read "pwned" and <body> carry a mark.
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert html.unescape(title) == XSS_TITLE
    assert "data-pwned" not in re.search(r"<body[^>]*>", dom).group(0)
    # No element was injected: there is no <svg> (the graph is a canvas) and no <img>.
    assert "<img" not in dom and "<svg" not in dom
    # Search found the injected name, and the status line quotes the query as text.
    assert re.search(r'id="fg-status">\u201c&lt;/script\u201d: [1-9]\d* functions?, ', dom)


def _legend(page: str) -> list[tuple[str, str]]:
    block = page.split('<div class="legend">', 1)[1].split("</div>", 1)[0]
    return re.findall(r'background:([^"]+)"></span>([^<]*)</span>', block)


def test_the_legend_follows_the_colouring(data):
    by_res = _legend(render_flame(_basic(data), "html", color_by="resource"))
    assert [label for _, label in by_res][:2] == [
        "http://127.0.0.1:8000/page.html?exp=basic",
        "http://127.0.0.1:8000/workload-ext.js?v=2",
    ]
    page = render_flame(_basic(data), "html", color_by="function")
    by_fn = _legend(page)
    labels = [label for _, label in by_fn]
    # the hottest functions by self time, each with the colour its frames have
    # (an anonymous function is named by its file and line, as everywhere: no URL)
    assert labels[0] == "busyLoop" and "fib" in labels and "http" not in " ".join(labels)
    assert "(anonymous page.html:45)" in labels
    drawn = _drawn_fills(page)
    for fill, label in by_fn:
        assert fill in drawn[label], label


def _col(b64: str, dtype: str) -> np.ndarray:
    if b64.startswith("~"):  # packed (render/packed.py)
        from jsprof.render.packed import unpack

        return unpack(b64)
    return np.frombuffer(base64.b64decode(b64), dtype)


def _drawn_fills(page: str) -> dict[str, set[str]]:
    """Each drawn name's fills, from the columns the page's canvas is drawn from."""
    d = json.loads(re.search(r'id="fg-data">(.*?)</script>', page).group(1))
    out: dict[str, set[str]] = {}
    for n, f in zip(_col(d["cols"]["n"], "<i4"), _col(d["cols"]["f"], "<i4"), strict=True):
        out.setdefault(d["names"][n], set()).add(d["fills"][f])
    return out


def test_the_page_script_is_package_data_and_valid_javascript():
    from jsprof import render
    from jsprof.render import flame

    js = Path(render.__file__).with_name("flame.js")  # package data of render/, beside flame/
    assert js.read_text() == flame.flame_script()
    assert flame.flame_script() in render_flame(_basic_tree_small(), "html")
    svg_js = js.with_name("flame_svg.js")
    assert svg_js.read_text() == flame.svg_script()
    assert flame.svg_script() in render_flame(_basic_tree_small(), "svg")
    for f in (js, svg_js):
        r = subprocess.run(["node", "--check", str(f)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert '"render/*.js"' in pyproject


@pytest.mark.parametrize("fmt", ["html", "svg"])
def test_each_function_is_worded_once_per_page(data: Path, fmt: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A function's label is made once for the page's frames, model and index (and once
    by the colour rule), not once per drawn frame and per view: that per-frame wording was
    most of the render's CPU on a fleet flame page (issue 34)."""
    from jsprof.trace import FunctionKey

    rec = io.load(data / "node" / "bench.cpuprofile")
    tree = build_call_tree(rec)
    calls = [0]
    real = FunctionKey.label

    def label(self: FunctionKey) -> str:
        calls[0] += 1
        return real(self)

    monkeypatch.setattr(FunctionKey, "label", label)
    render_flame(tree, fmt, rec=rec)
    assert len(tree.parent) > 3 * len(tree.functions)  # frames repeat functions
    assert calls[0] <= 2 * len(tree.functions) + 4


def _basic_tree_small():
    return build_call_tree(_rec([["main", "a"], ["main", "b"]]))


# ---- the viewer's views, driven in headless Chromium by Playwright --------------------------

QUICKJS_APP = """
function leaf(n) { let x = 0; for (let i = 0; i < n; i++) x += i % 7; return x; }
function fib(n) { return n < 2 ? leaf(200) : fib(n - 1) + fib(n - 2); }
function parse() { let s = 0; for (let k = 0; k < 40; k++) s += leaf(20000); return s; }
function main() {
  const end = Date.now() + 400; let s = 0;
  while (Date.now() < end) { s += fib(12); s += parse(); }
  return s;
}
main();
"""


@pytest.fixture(scope="module")
def browser(chromium):
    with playwright_chromium() as b:
        yield b


def _page(browser, url: str, width: int = 1280, height: int = 700):
    """`url` once its first view shows (page.errors: its errors), at this file's size."""
    return open_page(browser, url, None, width, height)


def _write_flame(trace: Path, out: Path) -> Path:
    assert main(["flame", str(trace), "-o", str(out)]) == 0
    return out


def _report(trace: Path, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["report", str(trace), "--json", "--all"]) == 0
    return json.loads(capsys.readouterr().out)["rows"]


def _quickjs_trace(tmp_path: Path) -> Path:
    app = tmp_path / "app.js"
    app.write_text(QUICKJS_APP)
    out = tmp_path / "app.quickjs.json"
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "--interval", "0.5", "-o", str(out),
         str(app)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    return out


def test_viewer_tabs_hash_sticky_header_and_tooltip(browser, data, tmp_path):
    page_file = _write_flame(data / "chromium" / "trace-basic.json", tmp_path / "f.html")
    page = _page(browser, page_file.as_uri(), height=300)  # shorter than the graph
    assert page.evaluate("document.body.dataset.view") == "flame"
    # The graph opens at its roots, scrolled down; the header stays on screen.
    assert page.evaluate("window.scrollY") > 0
    for sel in ("h1", "#fg-search", ".legend", "nav.tabs"):
        box = page.locator(sel).bounding_box()
        assert box is not None and 0 <= box["y"] < 120, (sel, box)
    # The tooltip shows on hover, and hides on Esc and on a search keystroke.
    frame = _frame(page, 5)
    page.mouse.move(frame["cx"], frame["cy"])
    assert page.locator("#fg-tip").is_visible()
    page.keyboard.press("Escape")
    assert not page.locator("#fg-tip").is_visible()
    page.mouse.move(frame["cx"] + 1, frame["cy"])
    assert page.locator("#fg-tip").is_visible()
    page.locator("#fg-search").type("f")
    assert not page.locator("#fg-tip").is_visible()
    # Tabs and the hash switch views; the body names the one on screen.
    page.locator("nav.tabs a[data-tab='sandwich']").click()
    wait(page, "document.body.dataset.view === 'sandwich'")
    assert page.locator("#v-sandwich").is_visible() and not page.locator("#v-flame").is_visible()
    assert "view=sandwich" in page.url
    page.evaluate("location.hash = 'view=flame'")
    wait(page, "document.body.dataset.view === 'flame'")
    assert page.locator("#fg-canvas").is_visible()
    # An unknown view falls back to the flame graph.
    page2 = _page(browser, page_file.as_uri() + "#view=nonsense")
    assert page2.evaluate("document.body.dataset.view") == "flame"
    assert page.errors == [] and page2.errors == []
    page.screenshot(path=str(tmp_path / "flame.png"))
    assert Image.open(tmp_path / "flame.png").size == (1280, 300)


def test_a_link_naming_an_object_member_opens_the_flame_graph(browser, data, tmp_path):
    # #view=constructor found Object's own member as a view: "views[name].show is not a
    # function", a blank page.
    page_file = _write_flame(data / "chromium" / "trace-basic.json", tmp_path / "f.html")
    for h in ("view=constructor", "view=__proto__", "view=toString&fn=constructor",
              "view=sandwich&fn=__proto__", "__proto__=x&view=hasOwnProperty"):
        page = _page(browser, page_file.as_uri() + "#" + h)
        assert page.evaluate("document.body.dataset.view") in ("flame", "sandwich"), h
        assert page.errors == [], (h, page.errors)
        page.close()


def test_a_long_title_keeps_the_header_on_one_line(browser, data, tmp_path):
    title = "checkout-flow-nightly-build-2026-12-01-run-42-chromium-desktop-profile-" * 3
    page_file = tmp_path / "long.html"
    page_file.write_text(render_flame(_basic(data), "html", title=title,
                                      subtitle="2079.7 ms \u00b7 157 samples \u00b7 main"))
    page = _page(browser, page_file.as_uri(), width=1280)
    h1, box = page.locator("h1").bounding_box(), page.locator("#fg-search").bounding_box()
    tabs = page.locator("nav.tabs").bounding_box()
    # Title, tabs and search box on one line, in that order; the title gives way.
    mid = h1["y"] + h1["height"] / 2
    assert abs(box["y"] + box["height"] / 2 - mid) < 8, (h1, box)
    assert abs(tabs["y"] + tabs["height"] / 2 - mid) < 8, (h1, tabs)
    assert h1["x"] + h1["width"] <= tabs["x"] and tabs["x"] + tabs["width"] <= box["x"]
    assert box["x"] + box["width"] <= 1280 and box["width"] >= 200
    assert page.locator("header").bounding_box()["height"] < 50
    assert page.locator("h1").get_attribute("title") == title  # the whole of it, on hover
    assert page.locator(".sub").is_visible()
    assert page.errors == []


def _rgb(fill: str) -> tuple[int, int, int]:
    import colorsys

    m = re.match(r"hsl\((-?[\d.]+),([\d.]+)%,([\d.]+)%\)", fill)
    h, s, light = (float(v) for v in m.groups())
    return tuple(round(255 * c) for c in colorsys.hls_to_rgb((h % 360) / 360, light / 100, s / 100))


def _near(a, b, tol: int = 12) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def test_the_canvas_is_sharp_on_a_dense_screen_and_labels_fit_their_box(browser, data, tmp_path):
    page_file = _write_flame(data / "chromium" / "trace-basic.json", tmp_path / "f.html")
    page = browser.new_page(viewport={"width": 1000, "height": 700}, device_scale_factor=2)
    page.goto(page_file.as_uri())
    wait(page, "document.body.dataset.ready === '1'")
    css_w, css_h, w, h = page.evaluate(
        "(c => [c.clientWidth, c.clientHeight, c.width, c.height])"
        "(document.getElementById('fg-canvas'))")
    assert (w, h) == (2 * css_w, 2 * css_h)  # one canvas pixel per device pixel
    png = tmp_path / "dpr2.png"
    page.screenshot(path=str(png))
    img = Image.open(png).convert("RGB")
    assert img.size == (2000, 1400)
    frames = [f for f in _drawn(page) if f["w"] >= 4]
    assert len(frames) > 20
    for f in frames:
        # Each frame's own colour where it is drawn (a device pixel inside its box, above
        # its label's letters).
        x, y = round(2 * f["cx"]), round(2 * (f["cy"] - 6.5))
        assert _near(img.getpixel((x, y)), _rgb(f["fill"])), (f, img.getpixel((x, y)))
    # A label is cut to its box, measured in the canvas's own font.
    labelled = [f for f in _drawn(page) if f["label"]]
    assert any(f["label"].endswith("\u2026") for f in labelled) and len(labelled) > 10
    widths = page.evaluate("""ls => { const g = document.createElement('canvas').getContext('2d');
        g.font = "11px ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace";
        return ls.map(t => g.measureText(t).width); }""", [f["label"] for f in labelled])
    for f, tw in zip(labelled, widths, strict=True):
        assert 3 + tw <= f["w"], (f, tw)
        assert f["name"].startswith(f["label"].rstrip("\u2026"))


def test_a_graph_deeper_than_any_canvas_draws_where_it_is_scrolled(browser, tmp_path):
    # 2,500 levels of recursion: 40,000 px of graph, past the largest canvas (32,767 px).
    stack = ["main"] + ["rec"] * 2499
    trace = tmp_path / "deep.json"
    io.save(_rec([stack, stack[:10]]), trace)
    page_file = _write_flame(trace, tmp_path / "deep.html")
    page = _page(browser, page_file.as_uri(), height=600)
    assert page.evaluate("document.getElementById('fg-wrap').offsetHeight") == 2501 * ROW
    assert page.evaluate("document.getElementById('fg-canvas').height") <= 600
    assert page.evaluate("window.scrollY") > 30000  # opened at the roots
    page.evaluate("window.scrollTo(0, 0)")
    wait(page, "(() => { const f = jsprofFrames().find(f => f.depth === 2500);"
                " return f && f.cy > 0 && f.cy < innerHeight; })()")
    top = next(f for f in _drawn(page) if f["depth"] == 2500)
    png = tmp_path / "deep.png"
    page.screenshot(path=str(png))
    assert _near(Image.open(png).convert("RGB").getpixel((int(top["cx"]), int(top["cy"]))),
                 _rgb(top["fill"]))
    page.mouse.move(top["cx"], top["cy"])
    assert page.locator("#fg-tip").text_content().startswith("rec\n")
    assert page.errors == []


def test_the_graph_speaks_to_keyboard_and_screen_reader_users(browser, data, tmp_path):
    page_file = _write_flame(data / "chromium" / "trace-basic.json", tmp_path / "f.html")
    page = _page(browser, page_file.as_uri())
    cv = page.locator("#fg-canvas")
    assert cv.get_attribute("role") == "img" and "Flame graph" in cv.get_attribute("aria-label")
    live = page.locator("#fg-live")
    assert live.get_attribute("aria-live") == "polite"
    # Hovering a frame puts its words in the live region.
    f5 = _frame(page, 5)
    page.mouse.move(f5["cx"], f5["cy"])
    assert live.text_content() == page.evaluate("jsprofTip(5)").replace("\n", ". ")
    # Tab to the graph: the root is focused; up goes towards the leaves, right along a row.
    page.mouse.move(0, 0)
    page.locator("#fg-search").focus()
    page.keyboard.press("Tab")
    # (past the transforms bar's controls: its first step and its ignore-list box)
    for _ in range(3):
        if page.evaluate("document.activeElement.id") == "fg-canvas":
            break
        assert page.evaluate("!!document.activeElement.closest('#fg-transforms')")
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "fg-canvas"
    assert live.text_content().startswith("all. every sample in the profile")
    for key in ("ArrowUp", "ArrowUp", "ArrowUp", "ArrowUp", "ArrowRight"):
        page.keyboard.press(key)
    said = live.text_content().split(". ")[0]
    frames = _drawn(page)
    # depth 4, the second frame of its row: [all, (anon), basic, workload, busyLoop | extWork]
    row4 = sorted((f for f in frames if f["depth"] == 4), key=lambda f: f["x"])
    assert said == row4[1]["name"] == "extWork"
    page.keyboard.press("ArrowDown")
    assert live.text_content().startswith("workload. ")
    page.keyboard.press("ArrowUp")  # the first callee: busyLoop
    assert live.text_content().startswith("busyLoop. ")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")  # zoom into extWork
    wait(page, "jsprofFrames().some(f => f.name === 'extWork' && !f.faded && f.w > 1000)")
    assert all(f["faded"] for f in _drawn(page) if f["depth"] < 4)
    page.keyboard.press("Escape")
    wait(page, "!jsprofFrames().some(f => f.faded)")
    # After a click (a zoom), the keys still walk: the first one starts at the zoomed frame.
    busy = next(f for f in _drawn(page) if f["name"] == "busyLoop" and f["depth"] == 4)
    page.mouse.click(busy["cx"], busy["cy"])
    wait(page, "jsprofFrames().some(f => f.name === 'busyLoop' && !f.faded && f.w > 1000)")
    page.keyboard.press("ArrowDown")
    assert live.text_content().startswith("busyLoop. ")
    page.keyboard.press("ArrowDown")
    assert live.text_content().startswith("workload. ")
    assert page.errors == []


def test_icicle_page_and_a_zoom_by_link(browser, data, tmp_path):
    page_file = tmp_path / "icicle.html"
    page_file.write_text(render_flame(_basic(data), "html", icicle=True))
    page = _page(browser, page_file.as_uri() + "#z=3")
    frames = _drawn(page)
    # The roots at the top, callees below; frame 3 fills the width, its ancestors faded.
    assert all(f["y"] == f["depth"] * ROW for f in frames)
    z = next(f for f in frames if f["i"] == 3)
    assert not z["faded"] and z["w"] == pytest.approx(_frame(page, 0)["w"], abs=0.01)
    assert {f["i"] for f in frames if f["faded"]} == {0, 1, 2}
    assert page.evaluate("window.scrollY") == 0  # an icicle opens at its roots: the top
    # The pointer finds frames in this orientation too.
    deep = max(frames, key=lambda f: (f["depth"], f["w"]))
    page.mouse.move(deep["cx"], deep["cy"])
    assert page.locator("#fg-tip").text_content().startswith(deep["name"] + "\n")
    page.locator("#fg-reset").click()
    wait(page, "!jsprofFrames().some(f => f.faded)")
    assert page.errors == []


def test_a_recording_without_samples_opens_empty(browser, tmp_path):
    tree = build_call_tree(Recording.of(TraceBuilder().build(), sample_interval=1.0))
    page_file = tmp_path / "empty.html"
    page_file.write_text(render_flame(tree, "html"))
    page = _page(browser, page_file.as_uri() + "#q=x")
    assert page.locator("#fg-canvas").get_attribute("data-frames") == "0"
    assert page.evaluate("jsprofFrames()") == []
    assert page.errors == []


def test_without_scripts_the_page_says_what_to_do(browser, data, tmp_path):
    page_file = _write_flame(data / "chromium" / "trace-basic.json", tmp_path / "f.html")
    ctx = browser.new_context(java_script_enabled=False)
    page = ctx.new_page()
    page.goto(page_file.as_uri())
    text = page.locator("#v-flame").inner_text()
    assert "scripts are off" in text and "-o flame.svg" in text
    assert page.locator("body").get_attribute("data-ready") is None
    ctx.close()


def _sandwich_rows(page) -> list[tuple[str, str, str, str]]:
    return page.eval_on_selector_all(
        "#v-sandwich table.fn tbody tr",
        "trs => trs.map(tr => [tr.children[4].textContent, tr.children[5].textContent,"
        " tr.children[0].textContent, tr.children[2].textContent])",
    )


def _check_sandwich_equals_report(browser, trace: Path, tmp_path: Path, capsys) -> None:
    rows = _report(trace, capsys)
    page_file = _write_flame(trace, tmp_path / (trace.name + ".html"))
    page = _page(browser, page_file.as_uri() + "#view=sandwich")
    assert page.evaluate("document.body.dataset.view") == "sandwich"
    shown = _sandwich_rows(page)
    # By self (the default), then by total: the table's first rows are report's.
    for sort, col in (("self", "self_ms"), ("total", "total_ms")):
        if sort == "total":
            page.locator("#v-sandwich th[data-sort='total']").click()
            shown = _sandwich_rows(page)
        top = sorted(rows, key=lambda r: -r[col])[:6]
        by_key = {(n, loc): (float(s), float(t)) for n, loc, s, t in shown}
        for r in top:
            # report --json rounds to 3 decimals, the table shows 1: equal to its precision
            got = by_key[(r["name"], r["location"])]
            assert got == pytest.approx((r["self_ms"], r["total_ms"]), abs=0.0505), (
                trace.name, r, got)
        first = [float(s if sort == "self" else t) for _, _, s, t in shown[:6]]
        assert first == sorted(first, reverse=True)
        assert first[0] == pytest.approx(top[0][col], abs=0.05)
    # Choosing a function shows its callers and callees; every number stays report's.
    hot = max((r for r in rows if r["location"]), key=lambda r: r["self_ms"])
    page.locator("#v-sandwich tbody tr", has_text=hot["name"]).first.click()
    # (the hash changes first; the view follows on its hashchange event)
    wait(page, "location.hash.indexOf('fn=') >= 0 && "
                "!!document.querySelector(\"[data-panel='callers']\")")
    callers = page.locator("[data-panel='callers']")
    callees = page.locator("[data-panel='callees']")
    assert callers.is_visible() and callees.is_visible()
    note = page.locator("[data-panel='function'] .note").text_content()
    assert f"self {hot['self_ms']:.1f} ms" in note and f"total {hot['total_ms']:.1f} ms" in note
    assert page.errors == []


def test_sandwich_equals_report_chromium(browser, data, tmp_path, capsys):
    _check_sandwich_equals_report(browser, data / "chromium" / "trace-basic.json", tmp_path, capsys)


def test_sandwich_equals_report_node(browser, data, tmp_path, capsys):
    _check_sandwich_equals_report(browser, data / "node" / "bench.cpuprofile", tmp_path, capsys)


def test_sandwich_equals_report_quickjs(browser, tmp_path, capsys):
    _check_sandwich_equals_report(browser, _quickjs_trace(tmp_path), tmp_path, capsys)


def test_sandwich_merges_callers_above_and_callees_below(browser, data, tmp_path):
    page_file = _write_flame(data / "chromium" / "trace-basic.json", tmp_path / "f.html")
    page = _page(browser, page_file.as_uri() + "#view=sandwich&fn=fib")
    callers = page.locator("[data-panel='callers'] svg")
    callees = page.locator("[data-panel='callees'] svg")
    # fib is called from arrowWork and from workload (merged over every path); it calls
    # only itself.
    caller_names = callers.locator("text").all_text_contents()
    assert {"fib", "arrowWork", "workload", "basic"} <= set(caller_names)
    callee_names = {t for t in callees.locator("text").all_text_contents() if t}
    assert callee_names == {"fib"}
    # Callers go up from fib (drawn at the bottom), callees down from it (at the top).
    c_box, e_box = callers.bounding_box(), callees.bounding_box()
    assert c_box["y"] + c_box["height"] <= e_box["y"]
    fib_y = callers.locator("rect").first.get_attribute("y")
    assert float(fib_y) == c_box["height"] - ROW
    # Clicking a caller makes it the chosen function.
    callers.locator("g", has_text="arrowWork").first.click()
    wait(page, "decodeURIComponent(location.hash).indexOf('fn=arrowWork') >= 0")
    # the hash changes first, the panel is drawn after it (CI read 'fib' in between)
    wait(page, "(document.querySelector(\"[data-panel='function'] h2\") || {}).textContent"
               " === 'arrowWork'")
    assert page.locator("[data-panel='function'] h2").text_content() == "arrowWork"
    page.screenshot(path=str(tmp_path / "sandwich.png"))
    assert page.errors == []


def test_sandwich_names_are_text_not_markup(browser, tmp_path):
    page_file = tmp_path / "xss.html"
    page_file.write_text(render_flame(_xss_tree(), "html"), encoding="utf-8")
    from urllib.parse import quote

    page = _page(browser, page_file.as_uri() + "#view=sandwich&fn=" + quote(XSS_MARK))
    assert page.locator("[data-panel='function'] h2").text_content() == XSS_MARK
    names = page.locator("#v-sandwich td.name").all_text_contents()
    assert XSS_SCRIPT in names and XSS_TITLE in names
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.body.hasAttribute('data-pwned')") is False
    assert page.errors == []


def test_sandwich_says_where_it_stops_drawing_callers(browser, tmp_path):
    # 600 levels of callers above the chosen function: 400 are drawn, silently before.
    stack = ["main"] + [f"d{i}" for i in range(599)] + ["leafFn"]
    trace = tmp_path / "deep.json"
    io.save(_rec([stack, ["main", "other"]]), trace)
    page = _page(browser, _write_flame(trace, tmp_path / "deep.html").as_uri() +
                 "#view=sandwich&fn=leafFn")
    callers = page.locator("[data-panel='callers']")
    assert callers.locator("svg g").count() == 401
    assert "more than 400 levels above are not drawn" in \
        callers.locator("[data-note='cut']").text_content()
    # A shallow function's panels say nothing of the kind.
    page.evaluate("location.hash = 'view=sandwich&fn=other'")
    wait(page, "!!document.querySelector(\"[data-panel='callers']\") && "
                "document.querySelector(\"[data-panel='function'] h2\").textContent === 'other'")
    assert page.locator("[data-note='cut']").count() == 0
    assert page.errors == []


def test_sandwich_says_which_functions_the_file_left_out(browser, tmp_path):
    # 3 functions of one sample in 20,003 (under 0.01% each) are no rows of the table; the
    # status says so in a sentence, with and without a search (it began " (3 functions").
    trace = tmp_path / "thin.json"
    io.save(_rec([["main", "big"]] * 20000 + [["main", f"tiny{i}"] for i in range(3)]), trace)
    page = _page(browser, _write_flame(trace, tmp_path / "thin.html").as_uri() +
                 "#view=sandwich")
    left = "3 functions under 0.01% of the time are not in this file"
    assert page.locator("#fg-status").text_content() == left
    assert page.locator("#v-sandwich td.name").all_text_contents() == ["big", "main"]
    page.fill("#fg-search", "tiny")
    wait(page, "document.getElementById('fg-status').textContent.startsWith('\u201ctiny')")
    assert page.locator("#fg-status").text_content() == "\u201ctiny\u201d: 0 functions; " + left
    assert page.errors == []


def _two_track_recording(path: Path) -> Path:
    """main: parse 0-100 ms, GC 100-150 ms, render 150-250 ms, and two instrumented spans;
    worker 1: crunch 0-200 ms. One sample per ms."""
    from jsprof.trace import Spans, Track

    b = TraceBuilder()
    r = b.resource_id("file:///app.js")
    f_main, f_parse, f_render = (b.frame_id(n, r, i + 1, 1) for i, n in
                                 enumerate(("main", "parse", "render")))
    parse, render = b.stack_id([f_main, f_parse]), b.stack_id([f_main, f_render])
    for t in range(250):
        if t < 100:
            b.add_sample(float(t), parse, "script")
        elif t < 150:
            b.add_sample(float(t), None, "gc")
        else:
            b.add_sample(float(t), render, "script")
    main_tr = b.build()
    w = TraceBuilder()
    rw = w.resource_id("file:///worker.js")
    crunch = w.stack_id([w.frame_id("work", rw, 1, 1), w.frame_id("crunch", rw, 2, 1)])
    for t in range(200):
        w.add_sample(float(t), crunch)
    spans = Spans(
        start=np.array([0.0, 10.0]), end=np.array([240.0, 60.0]),
        frame=np.array([f_main, f_parse], np.int32), parent=np.array([-1, 0], np.int32),
    )
    rec = Recording([
        Track("main", main_tr, sample_interval=1.0, spans=spans),
        Track("worker 1", w.build(), sample_interval=1.0),
    ])
    io.save(rec, path)
    return path


def test_time_view_lanes_order_zoom_and_range_table(browser, tmp_path):
    trace = _two_track_recording(tmp_path / "two.jsprof.json")
    page_file = _write_flame(trace, tmp_path / "two.html")
    page = _page(browser, page_file.as_uri() + "#view=time")
    assert page.evaluate("document.body.dataset.view") == "time"
    lanes = page.eval_on_selector_all("[data-lane]", "es => es.map(e => e.dataset.lane)")
    assert lanes == ["main", "main markers", "main spans", "worker 1"]
    main_c = page.locator("[data-lane='main'] canvas")
    box = main_c.bounding_box()

    def x_of(t):  # the recording spans 0-250 ms at first
        return box["x"] + box["width"] * t / 250

    def tip_at(lane, t, depth):
        b = page.locator(f"[data-lane='{lane}'] canvas").bounding_box()
        page.mouse.move(b["x"] + b["width"] * t / 250, b["y"] + ROW * depth + ROW / 2)
        return page.locator("#fg-tip").text_content() if page.locator("#fg-tip").is_visible() \
            else ""

    # Samples in time order: parse, then (GC, no JavaScript) nothing, then render.
    assert tip_at("main", 50, 1).startswith("parse\n")
    assert tip_at("main", 125, 1) == ""
    assert tip_at("main", 200, 1).startswith("render\n")
    assert tip_at("main", 200, 0).startswith("main\n")
    assert tip_at("main markers", 125, 0).startswith("(gc)\n")
    assert tip_at("main spans", 30, 1).startswith("parse\n")
    assert "50.0 ms" in tip_at("main spans", 30, 1)  # the span's exact 10-60 ms
    assert tip_at("worker 1", 100, 1).startswith("crunch\n")
    page.screenshot(path=str(tmp_path / "time.png"))
    # Selecting 5-95 ms shows that range's table: parse and crunch, 90 ms each.
    page.mouse.move(x_of(5), box["y"] + 5)
    page.mouse.down()
    page.mouse.move(x_of(50), box["y"] + 5)
    page.mouse.move(x_of(95), box["y"] + 5)
    page.mouse.up()
    # (through the link: every view counts the range once its samples are read)
    wait(page, "document.querySelectorAll(\"[data-panel='range'] tr[data-f]\").length > 0")
    rows = page.eval_on_selector_all(
        "[data-panel='range'] tr[data-f]",
        "trs => trs.map(tr => [tr.children[4].textContent, +tr.children[0].textContent,"
        " +tr.children[2].textContent])",
    )
    got = {name: (s, t) for name, s, t in rows}
    assert set(got) == {"parse", "main", "crunch", "work"}
    assert got["parse"] == pytest.approx((90, 90), abs=1.5)
    assert got["main"] == pytest.approx((0, 90), abs=1.5)
    assert got["crunch"] == pytest.approx((90, 90), abs=1.5)
    # Zoom to the selection, then the wheel zooms in further around the cursor.
    page.get_by_role("button", name="Zoom to selection").click()
    label = page.locator("#v-time .tl-bar .note").first.text_content()
    start, end = map(float, re.findall(r"([\d.]+) ", label)[:2])
    assert start == pytest.approx(5, abs=1) and end == pytest.approx(95, abs=1)
    page.mouse.move(x_of(125), box["y"] + 5)  # the middle of the window (50 ms)
    page.mouse.wheel(0, -300)
    label = page.locator("#v-time .tl-bar .note").first.text_content()
    start2, end2 = map(float, re.findall(r"([\d.]+) ", label)[:2])
    assert start2 > start and end2 < end and 40 < (start2 + end2) / 2 < 60
    page.get_by_role("button", name="Whole recording").click()
    assert page.locator("#v-time .tl-bar .note").first.text_content().startswith(
        "showing 0.0 to 250.0 ms")
    assert page.errors == []


def test_a_time_lane_deeper_than_any_canvas_still_draws(browser, tmp_path):
    # 2,500 levels of recursion: a lane of 40,000 px (80,000 device px at ratio 2) is past
    # the largest canvas, which then draws nothing; the lane is a stack of canvases of 500
    # levels each, and every level is drawn (it stopped at 500).
    stack = ["main"] + ["rec"] * 2499
    trace = tmp_path / "deep.json"
    io.save(_rec([stack, stack[:10], stack]), trace)
    page_file = _write_flame(trace, tmp_path / "deep.html")
    page = browser.new_page(viewport={"width": 1000, "height": 600}, device_scale_factor=2)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri() + "#view=time")
    wait(page, "document.body.dataset.view === 'time'")
    lane = page.locator("[data-lane='main']")
    assert "(2500 levels)" in lane.locator(".lane-name").text_content()
    heights = page.evaluate(
        "Array.from(document.querySelectorAll(\"[data-lane='main'] canvas\")).map(c => c.height)")
    assert len(heights) == 5 and max(heights) <= 32767, heights
    box = lane.locator("canvas").first.bounding_box()
    png = tmp_path / "deep-time.png"
    page.screenshot(path=str(png))
    img = Image.open(png).convert("RGB")
    # main (the root row) and a deeper row are painted, across the lane.
    for y in (box["y"] + ROW / 2, box["y"] + ROW * 7.5):
        painted = [img.getpixel((int(box["x"] + box["width"] * f) * 2, int(y) * 2))
                   for f in (0.1, 0.5, 0.9)]
        assert all(min(p) < 235 for p in painted), (y, painted)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + ROW / 2)
    assert page.locator("#fg-tip").text_content().startswith("main\n")
    # The deepest level (2,499) is drawn once its canvas is scrolled to, and answers hover.
    last = lane.locator("canvas").last
    page.evaluate("(() => { const c = document.querySelectorAll(\"[data-lane='main'] canvas\");"
                  " const r = c[c.length - 1].getBoundingClientRect();"
                  " window.scrollBy(0, r.bottom - window.innerHeight + 40); })()")
    wait(page, "jsprofTimeBoxes().some(b => b.depth === 2499)")
    lb = last.bounding_box()
    y = lb["y"] + lb["height"] - ROW / 2
    page.screenshot(path=str(png))
    img = Image.open(png).convert("RGB")
    painted = [img.getpixel((int(lb["x"] + lb["width"] * f) * 2, int(y) * 2)) for f in (0.1, 0.9)]
    assert all(min(p) < 235 for p in painted), painted
    page.mouse.move(lb["x"] + lb["width"] * 0.1, y)
    assert page.locator("#fg-tip").text_content().startswith("rec\n")
    assert errors == []


def test_a_time_view_with_no_javascript_says_why_it_is_blank(browser, tmp_path):
    # A trace with samples and no stack, as Chromium's own Profiler gives for an idle page
    # (spec JSON: samples with a timestamp and no stackId). The Time view drew an axis and
    # nothing else, with no word why. (It used a QuickJS recording of an empty script; since
    # 61b2ee2 that one's start tick goes to the script's top-level code, rightly.)
    trace = tmp_path / "idle.json"
    trace.write_text(json.dumps({
        "resources": [], "frames": [], "stacks": [],
        "samples": [{"timestamp": 10.0 * i} for i in range(5)],
    }))
    page = _page(browser, _write_flame(trace, tmp_path / "empty.html").as_uri() + "#view=time")
    assert page.evaluate("document.body.dataset.view") == "time"
    assert page.locator("#v-time [data-lane]").count() == 0
    assert "no sample of this recording ran JavaScript" in \
        page.locator("#v-time [data-note='nolanes']").text_content()
    assert page.errors == []


def test_a_very_long_name_keeps_the_tooltip_on_screen(browser, tmp_path):
    # A 100,000-character name made a tooltip 21,000 px tall: its numbers were off-screen.
    long = "L" * 99_990 + "_endOfName"
    trace = tmp_path / "long.json"
    io.save(_rec([["main", long]] * 3 + [["main", "other"]]), trace)
    page = _page(browser, _write_flame(trace, tmp_path / "long.html").as_uri())
    f = next(f for f in _drawn(page) if f["label"].startswith("LLL"))
    page.mouse.move(f["cx"], f["cy"])
    tip = page.locator("#fg-tip")
    box = tip.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 700, box
    text = tip.text_content()
    assert "_endOfName (100000 characters)" in text and "total 3.0 ms (75.0%)" in text, text
    assert len(text) < 1000
    # The same words for a screen reader: the focused frame's live region.
    assert len(page.locator("#fg-live").text_content()) < 1000
    assert page.errors == []


def test_flame_of_samples_with_no_time_says_so(tmp_path, capsys):
    # A .cpuprofile of one sample (V8 writes no interval): report counts 1 sample of 0 ms;
    # flame said "has no samples".
    prof = {"nodes": [{"id": 1, "callFrame": {"functionName": "(root)", "scriptId": "0",
                                              "url": "", "lineNumber": -1, "columnNumber": -1},
                       "children": [2]},
                      {"id": 2, "callFrame": {"functionName": "only", "scriptId": "1",
                                              "url": "file:///app.js", "lineNumber": 0,
                                              "columnNumber": 0}}],
            "startTime": 0, "endTime": 1000, "samples": [2], "timeDeltas": [1000]}
    trace = tmp_path / "one.cpuprofile"
    trace.write_text(json.dumps(prof))
    capsys.readouterr()
    assert main(["report", str(trace)]) == 0
    assert "1 sample, 0.0 ms" in capsys.readouterr().out
    assert main(["flame", str(trace), "-o", str(tmp_path / "one.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "one.cpuprofile: has 1 sample and no sampled time" in err, err
    assert not (tmp_path / "one.html").exists()


def test_flame_track_selector(browser, tmp_path):
    trace = _two_track_recording(tmp_path / "two.jsprof.json")
    page_file = _write_flame(trace, tmp_path / "two.html")
    page = _page(browser, page_file.as_uri() + "#q=crunch")
    sel = page.locator("#fg-track")
    assert sel.is_visible()
    assert sel.locator("option").all_text_contents() == ["All 2 tracks", "main", "worker 1"]

    def status():
        return page.locator("#fg-status").text_content()

    def shown(name):
        return shown_in(page, name)

    # 450 ms in all: crunch is worker 1's 200 ms.
    assert "44.4 % of samples (200.0 ms" in status()
    assert shown("parse") == 1 and shown("crunch") == 1
    sel.select_option(label="worker 1")
    wait(page, "document.getElementById('fg-status').textContent.indexOf('100.0 %') > 0")
    assert shown("parse") == 0 and shown("crunch") == 1
    crunch = next(f for f in _drawn(page) if f["name"] == "crunch")
    root = _frame(page, 0)
    assert crunch["w"] == pytest.approx(root["w"], abs=1)
    page.mouse.move(crunch["cx"], crunch["cy"])
    tip = page.locator("#fg-tip").text_content()
    assert "worker 1: total 200.0 ms (100.0% of the track)" in tip
    sel.select_option(label="main")
    wait(page, "document.getElementById('fg-status').textContent.indexOf(': 0 functions') > 0")
    assert shown("parse") == 1 and shown("crunch") == 0
    # A link can name the track; the selector is only in the flame view.
    page2 = _page(browser, page_file.as_uri() + "#track=worker%201")
    assert page2.locator("#fg-track").input_value() == "1" and shown_in(page2, "parse") == 0
    page2.locator("nav.tabs a[data-tab='time']").click()
    wait(page2, "document.body.dataset.view === 'time'")
    assert not page2.locator("#fg-track").is_visible()
    assert page.errors == [] and page2.errors == []


def shown_in(page, name):
    """How many frames named `name` the canvas draws now."""
    return sum(1 for f in _drawn(page) if f["name"] == name)


def _drawn(page) -> list[dict]:
    """The frames the canvas draws now (the page's jsprofFrames(): name, box, state)."""
    return page.evaluate("jsprofFrames()")


def _frame(page, i: int) -> dict:
    return next(f for f in _drawn(page) if f["i"] == i)


def test_one_track_has_no_selector(browser, data, tmp_path):
    page_file = _write_flame(data / "chromium" / "trace-basic.json", tmp_path / "f.html")
    page = _page(browser, page_file.as_uri())
    assert not page.locator("#fg-track").is_visible()


def test_diff_flame_opens_in_the_same_viewer(browser, tmp_path, capsys):
    base = _two_track_recording(tmp_path / "base.jsprof.json")
    out = tmp_path / "d.html"
    assert main(["diff", str(base), str(base), "--flame", str(out)]) == 0
    page = _page(browser, out.as_uri())
    assert page.evaluate("document.body.dataset.view") == "flame"
    tabs = page.locator("nav.tabs a").all_text_contents()
    assert tabs == ["Flame", "Time", "Sandwich", "Bottom-up", "Call tree", "Source"]
    assert "than base" in page.locator(".legend").text_content()
    page.locator("nav.tabs a[data-tab='time']").click()
    wait(page, "document.body.dataset.view === 'time'")
    assert page.locator("[data-lane='worker 1']").count() == 1
    assert page.errors == []


def _fills_by_name(boxes: list[dict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for b in boxes:
        out.setdefault(b["name"], set()).add(b["fill"])
    return out


def test_one_colour_rule_in_the_flame_time_and_sandwich_views(browser, data, tmp_path, capsys):
    """A function has one colour in every view: by script (the legend's scripts) by default,
    by name with --color-by function. The Time view coloured by function while the Flame
    view coloured by script, so the legend did not explain it. A diff's Flame view keeps
    its change colours; its other views keep the script rule."""
    trace = data / "chromium" / "trace-basic.json"
    pages = {}
    for mode in ("resource", "function"):
        out = tmp_path / f"{mode}.html"
        assert main(["flame", str(trace), "--color-by", mode, "-o", str(out)]) == 0
        pages[mode] = out
    out = tmp_path / "diff.html"
    assert main(["diff", str(trace), str(trace), "--flame", str(out)]) == 0
    pages["diff"] = out
    time_fills = {}
    for mode, page_file in pages.items():
        page = _page(browser, page_file.as_uri())
        flame = _fills_by_name(_drawn(page))
        page.evaluate("location.hash = 'view=time'")
        wait(page, "document.body.dataset.view === 'time'")
        boxes = page.evaluate("jsprofTimeBoxes()")
        timed = _fills_by_name(boxes)
        time_fills[mode] = timed
        assert {"busyLoop", "fib", "extInner", "extWork"} <= set(timed)
        for name, fills in timed.items():
            assert len(fills) == 1, (mode, name, fills)  # one colour per function
            if mode != "diff":
                assert fills == flame[name], (mode, name, fills, flame[name])
        # What is on screen is that colour (the middle of each wide box).
        png = tmp_path / f"{mode}-time.png"
        page.screenshot(path=str(png))
        img = Image.open(png).convert("RGB")
        wide = [b for b in boxes if b["w"] >= 12 and 0 < b["cy"] < 700]
        assert len(wide) >= 5
        for b in wide:
            got = img.getpixel((int(b["cx"]), int(b["cy"]) + 4))  # below the label's text
            assert _near(got, _rgb(b["fill"])), (mode, b, got)
        if mode == "resource":
            # Each script keeps its own hue family: the external script's functions are
            # told from the page's at a glance, as the legend says.
            hue = {n: float(next(iter(f)).split("(")[1].split(",")[0]) for n, f in timed.items()}
            assert abs(hue["extInner"] - hue["busyLoop"]) > 60
            assert abs(hue["extInner"] - hue["extWork"]) <= 14
        # The Sandwich's callers and callees: the same fills.
        page.evaluate("location.hash = 'view=sandwich&fn=busyLoop'")
        wait(page, "document.querySelector(\"[data-panel='callers'] rect\") !== null")
        trie = page.eval_on_selector_all(
            "[data-panel='callers'] g, [data-panel='callees'] g",
            "gs => gs.map(g => ({name: g.querySelector('text').textContent,"
            " fill: g.querySelector('rect').getAttribute('fill')}))",
        )
        for t in trie:
            if t["name"] in timed:  # a label cut short is not a name
                assert {t["fill"]} == timed[t["name"]], (mode, t)
        assert page.errors == []
    assert time_fills["diff"] == time_fills["resource"]
    assert time_fills["function"] != time_fills["resource"]


BIDI_APP = """\
function spin(n) { let x = 0; for (let i = 0; i < n; i++) x += i % 7; return x; }
const o = {
  ["admin\\u202Enimda"]() { return spin(30000); },
  ["user\\u2066resu\\u2069"]() { return spin(30000); },
};
const end = Date.now() + 300;
let s = 0;
while (Date.now() < end) { s += o["admin\\u202Enimda"](); s += o["user\\u2066resu\\u2069"](); }
"""
EVIL = "admin\u202enimda"
ISOLATED = "user\u2066resu\u2069"
BIDI_RE = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_bidi_controls_in_names_are_shown_not_obeyed(browser, tmp_path):
    """A name holding U+202E (right-to-left override) or the isolates drew reversed and
    could pass for another name; every view, tooltip, table and the static SVG show the
    controls as escapes ("\\u202e"), while the data and the search keep the exact name.
    A real QuickJS recording: methods named by computed keys holding the controls."""
    app = tmp_path / "bidi.js"
    app.write_text(BIDI_APP)
    trace = tmp_path / "bidi.json"
    p = subprocess.run([sys.executable, "-m", "jsprof.cli", "record", "-o", str(trace), str(app)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    shown = {EVIL: "admin\\u202enimda", ISOLATED: "user\\u2066resu\\u2069"}
    page_file = _write_flame(trace, tmp_path / "bidi.html")
    page = _page(browser, page_file.as_uri())
    frames = {f["name"]: f for f in _drawn(page)}
    assert EVIL in frames and ISOLATED in frames  # the data keeps the exact names
    for name, text in shown.items():
        f = frames[name]
        assert f["label"] == text  # the canvas label
        assert page.evaluate(f"jsprofTip({f['i']})").split("\n")[0] == text
        page.mouse.move(f["cx"], f["cy"])
        assert page.locator("#fg-tip").text_content().split("\n")[0] == text
        assert page.locator("#fg-live").text_content().startswith(text + ".")
    # The search takes the exact name and finds its frame.
    page.locator("#fg-search").fill(EVIL)
    wait(page, "document.getElementById('fg-status').textContent !== ''")
    assert [f["name"] for f in _drawn(page) if f["hit"]] == [EVIL]
    said = page.locator("#fg-status").text_content()
    assert said.startswith("\u201cadmin\\u202enimda\u201d: 1 function")
    page.locator("#fg-search").fill("")
    wait(page, "document.getElementById('fg-status').textContent === ''")
    # Sandwich: the table's cells and titles, the chosen function's heading and its trees.
    from urllib.parse import quote

    page.evaluate(f"location.hash = 'view=sandwich&fn={quote(EVIL)}'")
    wait(page, "document.querySelector(\"[data-panel='callers'] rect\") !== null")
    cells = page.eval_on_selector_all("#v-sandwich td[data-col=name]",
                                      "tds => tds.map(td => [td.textContent, td.title])")
    for text in shown.values():
        assert [text, text] in cells
    assert page.locator("[data-panel='function'] h2").text_content() == shown[EVIL]
    assert shown[EVIL] in page.locator("[data-panel='callers']").text_content()
    # Source view list, then the function's own page.
    page.evaluate("location.hash = 'view=source'")
    wait(page, "document.querySelector(\"#v-source [data-panel='list']\") !== null")
    names = [n for n, _ in _source_list(page)]
    assert shown[EVIL] in names and shown[ISOLATED] in names
    # Time view: a box's tooltip.
    page.evaluate("location.hash = 'view=time'")
    wait(page, "document.body.dataset.view === 'time'")
    box = max((b for b in page.evaluate("jsprofTimeBoxes()") if b["name"] == ISOLATED),
              key=lambda b: b["w"])
    page.mouse.move(box["cx"], box["cy"])
    assert page.locator("#fg-tip").text_content().split("\n")[0] == shown[ISOLATED]
    # Nothing on the page holds a control as text (the data blocks are not text).
    body = page.evaluate("document.body.innerText")
    assert not BIDI_RE.search(body), [m.group() for m in BIDI_RE.finditer(body)]
    page.screenshot(path=str(tmp_path / "bidi-time.png"))
    assert page.errors == []
    # The static SVG: titles and labels show escapes; its data keeps the names.
    svg = tmp_path / "bidi.svg"
    assert main(["flame", str(trace), "-o", str(svg)]) == 0
    root = ET.parse(svg).getroot()
    texts = [t.text or "" for t in root.iter(SVG_NS + "title")]
    texts += [t.text or "" for t in root.iter(SVG_NS + "text")]
    assert any(t.startswith(shown[EVIL]) for t in texts)
    assert not any(BIDI_RE.search(t) for t in texts)
    data = json.loads(next(s.text for s in root.iter(SVG_NS + "script")
                           if "names" in (s.text or "")))
    assert EVIL in data["names"] and ISOLATED in data["names"]


def _svg_titles(svg_file: Path) -> dict[int, str]:
    return {int(g.attrib["data-i"]): g.find(SVG_NS + "title").text
            for g in ET.parse(svg_file).getroot().iter(SVG_NS + "g") if "data-i" in g.attrib}


def test_canvas_tooltips_say_what_the_svg_titles_say(browser, data, tmp_path):
    """The page words each frame's tooltip from its columns; the SVG picture's <title>s are
    written by render/flame/: the same words and numbers, frame by frame (diffs too)."""
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    io.save(_rec([["main", "a"]] * 8 + [["main", "b", "c"]] * 2 + [["main"]] * 3), base)
    io.save(_rec([["main", "a"]] * 2 + [["main", "b", "c"]] * 7 + [["main", "d"]] * 5), new)
    runs = {
        "basic": ["flame", str(data / "chromium" / "trace-basic.json"), "-o"],
        "diff": ["diff", str(base), str(new), "--flame"],
    }
    for name, args in runs.items():
        svg, page_file = tmp_path / f"{name}.svg", tmp_path / f"{name}.html"
        assert main([*args, str(svg)]) == 0 and main([*args, str(page_file)]) == 0
        titles = _svg_titles(svg)
        page = _page(browser, page_file.as_uri())
        tips = page.evaluate("jsprofFrames().map(f => [f.i, jsprofTip(f.i)])")
        assert len(tips) == len(titles) > 3
        for i, tip in tips:
            assert tip == titles[i], (name, i)
        if name == "diff":
            assert any("vs base: self +" in t for t in titles.values())
            assert any(t.startswith("d\n") and "new: this call path" in t for t in titles.values())
        # The pointer gets the same words, found by row and binary search, on every frame.
        for f in page.evaluate("jsprofFrames()"):
            if f["w"] < 2:
                continue
            page.mouse.move(f["cx"], f["cy"])
            assert page.locator("#fg-tip").text_content() == titles[f["i"]], (name, f)
        assert page.errors == []


# ---- the source view: each line's self time, equal to `report --by line` -------------------

SOURCE_APP = """\
function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

function parse() {
  // </script><img src=x onerror="document.body.setAttribute('data-pwned','1')"> & \u2028
  let s = 0;
  for (let i = 0; i < 4000; i++) {
    s += JSON.parse('{"a": [1, 2, 3]}').a.length;
  }
  return s;
}

function main() {
  const end = Date.now() + 500;
  let s = 0;
  while (Date.now() < end) {
    s += fib(12);
    s += parse();
  }
  return s;
}
main();
"""


def _source_app(tmp_path: Path, engine: str) -> tuple[Path, Path]:
    """A real recording of SOURCE_APP (a page loading it, for Chromium), and the script."""
    return record_app(tmp_path, SOURCE_APP, engine), tmp_path / "app.js"


def _report_lines(trace: Path, capsys, *extra: str) -> list[dict]:
    capsys.readouterr()
    if main(["report", str(trace), "--by", "line", "--json", "--all", *extra]) != 0:
        # Once in CI a Chromium recording had no line data at all: say what it held.
        err = capsys.readouterr().err
        main(["report", str(trace), "--top", "15"])
        pytest.fail(f"report --by line failed: {err}\nrecord said:\n{record_log(trace)}\n"
                    f"the trace by function:\n{capsys.readouterr().out}")
    return json.loads(capsys.readouterr().out)["rows"]


def _source_rows(page) -> dict[int, tuple[str, str, str]]:
    """line -> (self ms, samples, source text) of the source table."""
    got = page.eval_on_selector_all(
        "[data-table='source'] tbody tr[data-line]",
        "trs => trs.map(tr => [+tr.dataset.line,"
        " tr.querySelector('[data-col=self]').textContent,"
        " tr.querySelector('[data-col=samples]').textContent,"
        " tr.querySelector('.code').textContent])",
    )
    return {ln: (s, n, code) for ln, s, n, code in got}


def _ms(v: float) -> str:
    """As the viewer prints ms: 1 decimal, 3 below 0.1."""
    return f"{v:.1f}" if v >= 0.1 or v == 0 else f"{v:.3f}"


def _check_source_equals_report(browser, engine: str, tmp_path: Path, capsys) -> None:
    trace, app = _source_app(tmp_path, engine)
    rows = [r for r in _report_lines(trace, capsys) if r.get("resource") == app.as_uri()]
    fn_rows = _report(trace, capsys)
    page_file = _write_flame(trace, tmp_path / f"{engine}.html")
    text = app.read_text().split("\n")
    names = {r["name"] for r in rows if r["name"] in ("parse", "main", "fib")}
    assert "parse" in names, rows
    for name in sorted(names):
        by_fn = next(r for r in fn_rows if r["name"] == name)
        from urllib.parse import quote

        page = _page(browser, page_file.as_uri() + "#view=source&fn=" + quote(name))
        assert page.evaluate("document.body.dataset.view") == "source"
        note = page.locator("[data-panel='function'] .note").first.text_content()
        assert f"self {_ms(by_fn['self_ms'])} ms" in note
        assert f"total {_ms(by_fn['total_ms'])} ms" in note
        shown = _source_rows(page)
        mine = [r for r in rows if r["name"] == name]
        for r in mine:
            ln = r["line"] or 0
            s, n, code = shown[ln]
            # report --json rounds to 3 decimals, the view shows 1: equal to its precision
            assert float(s) == pytest.approx(r["self_ms"], abs=0.0505), (engine, r, s)
            assert int(n) == r["self_samples"], (engine, r, n)
            if ln:
                assert code == text[ln - 1], (engine, ln, code)  # the line's own text
        # Every other line shown has no time; the function's own lines are all there.
        hot = {r["line"] or 0 for r in mine}
        assert all(s == "" for ln, (s, _, _) in shown.items() if ln not in hot)
        first = {"fib": 1, "parse": 5, "main": 14}[name]
        assert shown[first][2] == text[first - 1]
        assert page.locator("[data-note='nosource']").count() == 0
        assert page.evaluate("document.body.hasAttribute('data-pwned')") is False
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        assert page.errors == []
    page = _page(browser, page_file.as_uri() + "#view=source&fn=parse")
    # The comment line with markup in it is text, shown as written.
    assert _source_rows(page)[6][2] == text[5]
    png = tmp_path / f"source-{engine}.png"
    page.screenshot(path=str(png))
    assert Image.open(png).size == (1280, 700)


def test_source_view_equals_report_quickjs(browser, tmp_path, capsys):
    _check_source_equals_report(browser, "quickjs", tmp_path, capsys)


def test_source_view_equals_report_node(browser, tmp_path, capsys):
    _check_source_equals_report(browser, "node", tmp_path, capsys)


def test_source_view_equals_report_chromium(browser, tmp_path, capsys):
    _check_source_equals_report(browser, "chromium", tmp_path, capsys)


def test_source_view_without_local_source_says_so(browser, data, tmp_path, capsys):
    """The Node fixture names file:///home/user/bench/bench.js, not on this machine: the
    view says so in a sentence and still lists report's lines; --embed-source DIR finds a
    script by its name in DIR."""
    trace = data / "node" / "bench.cpuprofile"
    rows = [r for r in _report_lines(trace, capsys) if r["name"] == "sortObjects"]
    page_file = _write_flame(trace, tmp_path / "bench.html")
    page = _page(browser, page_file.as_uri() + "#view=source&fn=sortObjects")
    note = page.locator("[data-note='nosource']").text_content()
    bench = "file:///home/user/bench/bench.js"
    assert f"No source for sortObjects: {bench} was not a local file" in note
    assert "--embed-source DIR" in note
    shown = _source_rows(page)
    assert {r["line"] or 0 for r in rows} == set(shown)
    for r in rows:
        assert float(shown[r["line"] or 0][0]) == pytest.approx(r["self_ms"], abs=0.0505)
    # A pseudo frame has no source at all.
    page = _page(browser, page_file.as_uri() + "#view=source&fn=" + "(garbage collector)")
    assert "not a function of a script" in page.locator("[data-note='nosource']").text_content()
    # The script found in --embed-source DIR by its name.
    d = tmp_path / "src"
    d.mkdir()
    lines = [f"// line {i}" for i in range(1, 60)]
    (d / "bench.js").write_text("\n".join(lines))
    out = tmp_path / "bench-embedded.html"
    assert main(["flame", str(trace), "--embed-source", str(d), "-o", str(out)]) == 0
    page = _page(browser, out.as_uri() + "#view=source&fn=sortObjects")
    assert page.locator("[data-note='nosource']").count() == 0
    shown = _source_rows(page)
    assert shown[18][2] == "// line 18" and float(shown[18][0]) == pytest.approx(476.086, abs=0.05)
    assert page.errors == []


def _source_list(page) -> list[tuple[str, str]]:
    return [tuple(r) for r in page.eval_on_selector_all(
        "#v-source [data-panel='list'] tr[data-f]",
        "trs => trs.map(tr => [tr.children[2].textContent, tr.children[3].textContent])",
    )]


def test_source_list_follows_the_search_box(browser, data, tmp_path):
    """The Source view's function list is narrowed by the search box as the Sandwich's table
    is (a name or location holding the query, any case) and says how many match; a search
    typed while one function's lines are shown goes back to that list (Back returns)."""
    page_file = _write_flame(data / "node" / "bench.cpuprofile", tmp_path / "bench.html")
    page = _page(browser, page_file.as_uri() + "#view=sandwich")
    box = page.locator("#fg-search")
    wanted = {}
    for q in ("SORT", "bench.js:1", "node:"):
        box.fill(q)
        wait(page, f"document.getElementById('fg-status').textContent.indexOf({q.lower()!r}) >= 0")
        wanted[q] = ({(n, loc) for n, loc, _, _ in _sandwich_rows(page)},
                     page.locator("#fg-status").text_content().split(";")[0])
    page = _page(browser, page_file.as_uri() + "#view=source")
    everything = set(_source_list(page))
    assert len(everything) > 10
    box = page.locator("#fg-search")
    for q, (sandwich, said) in wanted.items():
        box.fill(q)
        wait(page, f"document.getElementById('fg-status').textContent.indexOf({q.lower()!r}) >= 0")
        got = set(_source_list(page))
        assert got and got == sandwich & everything, (q, got, sandwich)
        assert all(q.lower() in (n + " " + loc).lower() for n, loc in got)
        n, said_here = len(got), page.locator("#fg-status").text_content()
        assert said_here == f"\u201c{q.lower()}\u201d: {n} function{'s' if n != 1 else ''}"
        if got == sandwich:
            assert page.locator("#fg-status").text_content() == said
    box.fill("no such function")
    wait(page, "document.querySelector(\"[data-note='nomatch']\") !== null")
    assert _source_list(page) == []
    # One function's lines are shown: a search lists the functions it matches.
    page = _page(browser, page_file.as_uri() + "#view=source&fn=sortObjects")
    assert page.locator("[data-panel='source']").count() == 1
    page.locator("#fg-search").type("fib")
    wait(page, "document.querySelector(\"#v-source [data-panel='list'] tr[data-f]\") !== null")
    assert [n for n, _ in _source_list(page)] == ["fib"]
    assert page.locator("#fg-status").text_content() == "\u201cfib\u201d: 1 function"
    page.go_back()
    wait(page, "document.querySelector(\"[data-panel='source']\") !== null")
    assert "sortObjects" in page.locator("[data-panel='function'] h2").text_content()
    page.screenshot(path=str(tmp_path / "source-search.png"))
    assert page.errors == []


def test_source_view_refusals(tmp_path, capsys):
    trace = tmp_path / "t.json"
    io.save(_rec([["main", "a"]]), trace)
    for args, want in (
        (["--embed-source", str(tmp_path / "nope")], "not a folder"),
        (["--embed-source", str(tmp_path), "--no-source"], "not allowed with"),
    ):
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            code = main(["flame", str(trace), "-o", str(tmp_path / "x.html"), *args])
            raise SystemExit(code)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert want in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
    assert not (tmp_path / "x.html").exists()


def test_source_view_reads_only_scripts_the_command_points_at(tmp_path, capsys, monkeypatch):
    """A trace names its scripts itself: a hostile one naming /etc/passwd, a key in a hidden
    folder, /proc/self/environ, /dev/zero or a FIFO gets none of them read into the page
    (and does not hang); a script in the trace's folder is read, and the command says so."""
    secret = tmp_path / "home" / ".ssh" / "id_rsa.js"  # a hidden folder, even with a .js name
    secret.parent.mkdir(parents=True)
    secret.write_text("SECRET-KEY-TEXT\n")
    notes = tmp_path / "home" / "notes.txt"  # not a script
    notes.write_text("PRIVATE-NOTES\n")
    fifo = tmp_path / "home" / "pipe.js"
    os.mkfifo(fifo)
    elsewhere = tmp_path / "elsewhere" / "lib.js"  # a script outside both folders
    elsewhere.parent.mkdir()
    elsewhere.write_text("function lib() { return 'OUTSIDE-TEXT'; }\n")
    tdir = tmp_path / "home" / "traces"
    tdir.mkdir()
    (tdir / "app.js").write_text("function app() {\n  return 'APP-TEXT';\n}\n")
    names = ["passwd", "key", "environ", "zero", "fifo", "notes", "lib", "app", "up"]
    res = {
        "passwd": "/etc/passwd",
        "key": secret.as_uri(),
        "environ": "/proc/self/environ",
        "zero": "/dev/zero",
        "fifo": str(fifo),
        "notes": str(notes),
        "lib": elsewhere.as_uri(),
        "app": (tdir / "app.js").as_uri(),
        "up": str(tdir / ".." / ".ssh" / "id_rsa.js"),
    }
    trace = tdir / "t.json"
    io.save(_rec([["main", n] for n in names], {**res, "main": res["app"]}), trace)
    monkeypatch.chdir(tmp_path / "home")  # the user's home as the current folder
    out = tmp_path / "out.html"
    capsys.readouterr()
    assert main(["flame", str(trace), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    page = out.read_text()
    for leak in ("root:x:", "SECRET-KEY-TEXT", "PRIVATE-NOTES", "OUTSIDE-TEXT", "PATH="):
        assert leak not in page, leak
    assert "APP-TEXT" in page
    assert f"source text of {tdir / 'app.js'}" in err and "--no-source" in err
    # The reader names what it would not read, and the page says why in a sentence.
    from jsprof.sourcemap_files import source_reader

    read = source_reader(roots=[os.getcwd(), tdir])
    assert [read(res[n]) for n in ("lib", "key", "passwd", "up")] == [None] * 4
    assert read.refused == {res[n] for n in ("lib", "key", "passwd", "up")}
    assert read(res["app"]) == (tdir / "app.js").read_text()
    assert '"outside"' in flame_script()
    # A real recording of a script outside both folders: its lines' numbers, no text, why.
    from jsprof.record import record

    work = tmp_path / "elsewhere" / "work.js"
    work.write_text(SOURCE_APP)
    real = tdir / "work.json"
    io.save(record(str(work), sample_interval=1.0), real)
    assert main(["flame", str(real), "-o", str(out)]) == 0
    page = out.read_text()
    src = json.loads(re.search(r'id="fg-source">(.*?)</script>', page).group(1))
    model = json.loads(re.search(r'id="fg-model">(.*?)</script>', page).group(1))
    why = {model["fname"][e[0]]: e[9] for e in src["fns"]}
    assert why["parse"] == "outside" and src["chunks"] == [] and "[1, 2, 3]" not in page
    # --embed-source DIR is the user pointing at a folder: its scripts are read.
    capsys.readouterr()
    assert main(["flame", str(trace), "--embed-source", str(elsewhere.parent), "-o", str(out)]) == 0
    assert "OUTSIDE-TEXT" in out.read_text() and "root:x:" not in out.read_text()


def test_root_and_home_are_no_source_roots_unless_named(tmp_path):
    """Run from / or from $HOME, flame would count that folder as where a trace's scripts
    may be read from: every script the user has. Those folders count only when named with
    --embed-source; flame says so in one line on stderr."""
    home = tmp_path / "home"
    (home / "src").mkdir(parents=True)
    (home / "traces").mkdir()
    work = home / "src" / "work.js"
    work.write_text(SOURCE_APP)
    trace = home / "traces" / "work.json"
    env = {**os.environ, "HOME": str(home)}
    jsprof_cmd = [sys.executable, "-m", "jsprof.cli"]
    rec = subprocess.run([*jsprof_cmd, "record", "-o", str(trace), str(work)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert rec.returncode == 0, rec.stderr
    out = tmp_path / "out.html"

    def flame(cwd: Path, *more: str) -> tuple[str, str]:
        p = subprocess.run([*jsprof_cmd, "flame", str(trace), "-o", str(out), *more],
                           capture_output=True, text=True, timeout=120, env=env, cwd=cwd)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        return out.read_text(), p.stderr

    for cwd, root in ((home, str(home)), (Path("/"), "/")):
        page, err = flame(cwd)
        assert "[1, 2, 3]" not in page and "source text of" not in err, (cwd, err)
        notes = [ln for ln in err.splitlines() if "too broad" in ln]
        assert len(notes) == 1 and f"under {root}:" in notes[0], err
        assert f"--embed-source {root} to include them" in notes[0]
    # Named, it counts; and a folder inside home is an ordinary one.
    page, err = flame(Path("/"), "--embed-source", str(home))
    assert "[1, 2, 3]" in page and f"source text of {work}" in err and "too broad" not in err
    page, err = flame(home / "src")
    assert "[1, 2, 3]" in page and "too broad" not in err


def test_no_source_keeps_the_numbers(tmp_path):
    app = tmp_path / "app.js"
    app.write_text(SOURCE_APP)
    from jsprof.record import record

    rec = record(str(app), sample_interval=1.0)
    trace = tmp_path / "app.json"
    io.save(rec, trace)
    with_src, without = tmp_path / "a.html", tmp_path / "b.html"
    assert main(["flame", str(trace), "-o", str(with_src)]) == 0
    assert main(["flame", str(trace), "--no-source", "-o", str(without)]) == 0
    assert "[1, 2, 3]" in with_src.read_text() and "[1, 2, 3]" not in without.read_text()
    block = re.search(r'id="fg-source">(.*?)</script>', without.read_text()).group(1)
    assert json.loads(block)["fns"]  # the per-line numbers stay


def test_source_text_of_a_page_is_its_scripts():
    from jsprof.analysis.source import SourceFile, script_text

    page = "<html>\n<script>\nfunction f() {\n  return 1;\n}\n</script>\n<p>x</p></html>"
    js = script_text(page, "file:///p.html?v=1")
    assert js.split("\n")[2] == "function f() {" and "<p>" not in js
    assert len(js) == len(page) and js.count("\n") == page.count("\n")
    sf = SourceFile(page, "file:///p.html")
    assert sf.function_lines(3, 10) == (3, 5)
    # A frame with no name at a function's first character is the script's own code.
    assert SourceFile("function g() {\n}\n", "a.js").function_lines(1, 1, named=False) is None


SM_LIB = """\
function computeChecksum(data) {
  let h = 0;
  for (let i = 0; i < data.length; i++) h = (h * 31 + data[i]) | 0;
  return h;
}
"""
SM_APP = """\
function runWorkload() {
  let total = 0;
  const end = Date.now() + 400;
  const rows = [];
  for (let i = 0; i < 3000; i++) rows.push(i * 7 % 13);
  while (Date.now() < end) total += computeChecksum(rows);
  return total;
}
console.log(runWorkload() !== 0);
"""


@pytest.mark.npm
@pytest.mark.parametrize("engine", ["quickjs", "node"])
def test_source_view_through_a_source_map(browser, tmp_path, capsys, engine):
    """A bundle (terser, one statement per line, the sources inside its map): with
    --sourcemap the view shows the ORIGINAL file's lines, from the map's sourcesContent
    (the original files are deleted first), and report --by line --sourcemap's numbers."""
    terser = Path(__file__).parent / "js" / "node_modules" / ".bin" / "terser"
    (tmp_path / "lib.js").write_text(SM_LIB)
    (tmp_path / "app.js").write_text(SM_APP)
    subprocess.run(
        [str(terser), "lib.js", "app.js", "--compress", "--mangle", "toplevel", "--format",
         "beautify=true", "--source-map", "url='bundle.js.map',includeSources", "-o",
         "bundle.js"],
        cwd=tmp_path, check=True,
    )
    lib_uri = (tmp_path / "lib.js").as_uri()
    (tmp_path / "lib.js").unlink()
    (tmp_path / "app.js").unlink()
    out = tmp_path / f"bundle.{engine}.json"
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "--engine", engine, "-o", str(out),
         str(tmp_path / "bundle.js")],
        capture_output=True, text=True, timeout=180,
    )
    assert p.returncode == 0, p.stderr
    rows = [r for r in _report_lines(out, capsys, "--sourcemap")
            if r["name"] == "computeChecksum"]
    assert rows and all(r["resource"] == lib_uri for r in rows), rows
    page_file = tmp_path / "b.html"
    assert main(["flame", str(out), "--sourcemap", "-o", str(page_file)]) == 0
    page = _page(browser, page_file.as_uri() + "#view=source&fn=computeChecksum")
    assert page.locator("[data-note='nosource']").count() == 0
    shown = _source_rows(page)
    lib = SM_LIB.split("\n")
    assert [shown[ln][2] for ln in range(1, 6)] == lib[:5]  # the original, whole function
    for r in rows:
        s, n, _ = shown[r["line"] or 0]
        assert float(s) == pytest.approx(r["self_ms"], abs=0.0505) and int(n) == r["self_samples"]
    assert any(r["line"] == 3 for r in rows)  # the loop: the hot line, in the original
    assert page.errors == []


# ---- search shares and zoom over what was too thin to draw -----------------------------------


def _thin_paths_recording(path: Path) -> Path:
    """main -> hot: 50,000 samples; main -> mid -> tiny<k>: one sample each for k < 1,000.
    Each tiny<k> is 0.02 px of the whole graph (not drawn); mid is 23 px (drawn)."""
    b = TraceBuilder()
    r = b.resource_id("file:///thin.js")
    main_f = b.frame_id("main", r, 1, 1)
    hot = b.stack_id([main_f, b.frame_id("hot", r, 2, 1)])
    mid = b.frame_id("mid", r, 3, 1)
    t = 0.0
    for k in range(1000):
        b.add_sample(t, b.stack_id([main_f, mid, b.frame_id(f"tiny{k}", r, 10 + k, 1)]))
        t += 1.0
    for _ in range(50_000):
        b.add_sample(t, hot)
        t += 1.0
    io.save(Recording.of(b.build(), sample_interval=1.0), path)
    return path


def _type(page, q: str) -> str:
    page.locator("#fg-search").fill(q)
    wait(page, "document.getElementById('fg-status').textContent"
          f".indexOf('\\u201c{q}\\u201d') >= 0")
    return page.locator("#fg-status").text_content()


def test_search_share_is_reports_with_paths_too_thin_to_draw(browser, tmp_path, capsys):
    trace = _thin_paths_recording(tmp_path / "thin.json")
    page_file = _write_flame(trace, tmp_path / "thin.html")
    assert "tiny17" not in re.search(r'id="fg-data">(.*?)</script>', page_file.read_text()).group(1)
    page = _page(browser, page_file.as_uri())
    for q, focus in (("tiny", "*tiny*"), ("tiny1", "*tiny1*"), ("mid", "mid"), ("i", "*i*")):
        capsys.readouterr()
        assert main(["report", str(trace), "--focus", focus, "--json"]) == 0
        want = json.loads(capsys.readouterr().out)["total_ms"]
        status = _type(page, q)
        m = re.search(r"([\d.]+) % of samples \(([\d.]+) ms", status)
        assert float(m.group(2)) == pytest.approx(want, abs=0.05), (q, status)
        assert m.group(1) == f"{100 * want / 51000:.1f}", (q, status)
    # The matches are painted in the search colour where the frame is: mid is magenta.
    _type(page, "mid")
    mid = next(f for f in _drawn(page) if f["name"] == "mid")
    assert mid["hit"] and not next(f for f in _drawn(page) if f["name"] == "hot")["hit"]
    png = tmp_path / "search.png"
    page.screenshot(path=str(png))
    r, g, b = Image.open(png).convert("RGB").getpixel((int(mid["cx"]), int(mid["cy"])))
    assert r > 200 and g < 130 and b > 200, (r, g, b)  # hsl(300,80%,62%)
    assert page.errors == []


def test_zoom_lays_out_the_children_too_thin_to_draw(browser, tmp_path):
    trace = _thin_paths_recording(tmp_path / "thin.json")
    page_file = _write_flame(trace, tmp_path / "thin.html")
    page = _page(browser, page_file.as_uri())
    assert not any(f["thin"] for f in _drawn(page))
    mid = next(f for f in _drawn(page) if f["name"] == "mid")
    page.mouse.click(mid["cx"], mid["cy"])
    wait(page, "jsprofFrames().some(f => f.thin)")
    # mid's children fill its width: no gap that would read as self time.
    frames = _drawn(page)
    mid = next(f for f in frames if f["name"] == "mid")
    below = [f for f in frames if f["thin"] and f["depth"] == mid["depth"] + 1]
    assert len(below) == 1000
    assert sum(f["w"] for f in below) == pytest.approx(mid["w"], rel=0.001)
    assert all(f["y"] == mid["y"] - ROW for f in below)  # the roots are at the bottom
    # A laid-out frame has the numbers of the tree in its tooltip and zooms in too; the
    # pointer finds it by its row and position (1.2 px wide).
    third = below[3]
    page.mouse.move(third["cx"], third["cy"])
    tip = page.locator("#fg-tip").text_content()
    assert tip.startswith(third["name"] + "\n"), (tip, third)
    assert re.search(r"^tiny\d+\nfile:///thin.js:\d+:1\ntotal 1.0 ms \(0.0%\)", tip), tip
    assert "1 sample" in tip
    page.mouse.click(third["cx"], third["cy"])
    wait(page, "jsprofFrames().filter(f => f.thin && !f.faded).length === 1")
    one = next(f for f in _drawn(page) if f["thin"] and not f["faded"])
    assert one["name"] == third["name"] and one["w"] > 1000  # the one tiny function, full width
    # Its ancestors hold the whole window: drawn full width, faded.
    assert all(f["faded"] and f["w"] == one["w"] for f in _drawn(page) if f["i"] != one["i"])
    # The search paints laid-out frames too.
    _type(page, "tiny")
    assert int(page.locator("#fg-canvas").get_attribute("data-hits")) >= 1
    assert next(f for f in _drawn(page) if f["thin"] and not f["faded"])["hit"]
    page.screenshot(path=str(tmp_path / "zoom.png"))
    page.keyboard.press("Escape")
    wait(page, "!jsprofFrames().some(f => f.thin)")
    assert page.errors == []
