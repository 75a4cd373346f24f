"""Make the pictures in docs/images/ from real recordings (`make docs-images`).

- flame.png and view-*.png: `jsprof flame` of examples/app.js recorded on QuickJS, in
  headless Chromium: the Flame view, then each other tab of the page (Time, Sandwich and
  Source of `tokenize`, Bottom-up, Call tree) opened by its URL hash.
- dashboard*.png, merged-time.png: a real `jsprof serve` on loopback that took uploads of
  real recordings (examples/app.js on QuickJS: release 1.4.1 as it is, 1.4.2 tokenizing
  twice the source, each as `<release>/app.js` so the diff matches them), its dashboard
  signed in: the top table of release 1.4.2, its merged flame graph and `tokenize`'s share
  per release (dashboard.png); the releases compared (dashboard-diff.png); the merged
  profile's Time view, each page load from its own start (merged-time.png).

Screenshots are quantized to 256 colours so each PNG stays well under 300 KB.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import orjson
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images"
JSPROF = Path(sys.executable).parent / "jsprof"
APP = ROOT / "examples" / "app.js"
CHROMIUM = os.environ.get("JSPROF_CHROMIUM", "/usr/bin/chromium")
# As the tests run it: no sandbox when root (CI), no GPU.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
MAX_BYTES = 300_000


def record(script: Path, out: Path) -> Path:
    subprocess.run([str(JSPROF), "record", "-o", str(out), str(script), "1"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return out


def save_png(raw: Path, dest: Path) -> None:
    """A palette PNG written to a temp file and renamed (never half a picture)."""
    img = Image.open(raw).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    tmp = dest.with_suffix(".png.tmp")
    img.save(tmp, format="PNG", optimize=True)
    size = tmp.stat().st_size
    if size > MAX_BYTES:
        tmp.unlink()
        raise SystemExit(f"docs_images: {dest.name} is {size} bytes (> {MAX_BYTES}): shrink it")
    os.replace(tmp, dest)
    print(f"{dest.relative_to(ROOT)}: {img.width}x{img.height}, {size // 1000} KB")


# The flame page's other tabs, each opened by its URL hash: (picture, hash, height, what to
# wait for once the view is shown).
VIEWS = (
    ("view-time", "view=time", 270, "#v-time > *"),
    ("view-sandwich", "view=sandwich&fn=tokenize", 340, "#v-sandwich table tr"),
    ("view-bottomup", "view=bottomup", 420, "#v-bottomup table tr"),
    ("view-calltree", "view=calltree", 420, "#v-calltree table tr"),
    ("view-source", "view=source&fn=tokenize", 470, "#v-source table tr"),
)


def flame(pw, tmp: Path) -> None:
    script = tmp / "app.js"  # its folder, not the checkout's, names the resource
    script.write_text(APP.read_text())
    rec = record(script, tmp / "app.jsprof.json")
    html = tmp / "flame.html"
    subprocess.run([str(JSPROF), "flame", str(rec), "-o", str(html)], check=True, timeout=120)
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        page = browser.new_page(viewport={"width": 1200, "height": 230})
        page.goto(html.as_uri())
        # the viewer draws on a canvas, marked once its script has run
        page.wait_for_selector("body[data-ready='1']", timeout=60000)
        page.wait_for_timeout(500)  # let the last frame paint
        page.screenshot(path=str(tmp / "flame.raw.png"))
        for name, fragment, height, ready in VIEWS:
            page = browser.new_page(viewport={"width": 1200, "height": height})
            page.goto(f"{html.as_uri()}#{fragment}")
            view = fragment.split("&")[0].split("=")[1]
            page.wait_for_selector(f"body[data-view='{view}']", timeout=60000)
            page.locator(ready).first.wait_for(state="attached", timeout=60000)
            page.wait_for_timeout(800)  # let the last frame paint
            page.screenshot(path=str(tmp / f"{name}.raw.png"))
            page.close()
    finally:
        browser.close()
    save_png(tmp / "flame.raw.png", OUT / "flame.png")
    for name, *_ in VIEWS:
        save_png(tmp / f"{name}.raw.png", OUT / f"{name}.png")


def upload(url: str, trace_file: Path, release: str, route: str, upload_id: str) -> None:
    doc = orjson.loads(trace_file.read_bytes())
    trace = {k: doc[k] for k in ("resources", "frames", "stacks", "samples")}
    q = urlencode({"app": "shop", "release": release, "route": route, "env": "prod",
                   "id": upload_id, "key": "pk_demo"})
    req = urllib.request.Request(
        f"{url}/v1/traces?{q}", method="POST",
        data=orjson.dumps({"trace": trace, "meta": {"sampleInterval": 1}}),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 202, r.status


def dashboard(pw, tmp: Path) -> None:
    token = secrets.token_hex(16)  # from the environment: never on a command line
    env = {**os.environ, "JSPROF_READ_TOKEN": token}
    proc = subprocess.Popen(
        [str(JSPROF), "serve", "--store", str(tmp / "store"), "--port", "0",
         "--app", "shop:pk_demo"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )
    try:
        line = proc.stdout.readline().decode()
        if "listening on " not in line:
            raise SystemExit("docs_images: jsprof serve did not start (run it to see why)")
        url = line.rsplit(" ", 1)[1].strip()
        # Release 1.4.2 "regressed": it tokenizes twice the source.
        source = APP.read_text()
        for release, text in (("1.4.1", source),
                              ("1.4.2", source.replace("makeSource(20000)", "makeSource(40000)"))):
            script = tmp / release / "app.js"  # a version folder: diff matches across releases
            script.parent.mkdir()
            script.write_text(text)
            for i in range(5):
                rec = record(script, tmp / f"{release}-{i}.jsprof.json")
                upload(url, rec, release, f"/build/{i % 2}", f"{release}-{i}")
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1030})
            page.goto(url + "/")
            page.fill("#token", token)
            page.click("#signin")
            page.wait_for_selector("body[data-ready='1']", timeout=60000)
            page.select_option("#release", "1.4.2")
            page.click("#apply")
            page.frame_locator("#flame").locator("body[data-ready='1']").wait_for(
                state="attached", timeout=60000)
            # every query of the filters answered, the flame frame drawn (no "Loading ..."
            # or "Drawing ..." sentence left on the page)
            page.wait_for_selector("#loading", state="hidden", timeout=120000)
            page.wait_for_function(
                "document.getElementById('flame-note').textContent === ''", timeout=120000)
            page.locator("#top td.fn", has_text="tokenize").first.click()
            page.locator("#chart rect").first.wait_for(timeout=60000)
            page.wait_for_timeout(500)  # let the last frame paint
            box = page.locator("#chart").bounding_box()  # down to the per-release chart
            page.screenshot(path=str(tmp / "dashboard.raw.png"), full_page=True,
                            clip={"x": 0, "y": 0, "width": 1280,
                                  "height": box["y"] + box["height"] + 12})
            # The releases compared: the table and the differential flame graph.
            page.select_option("#base", "1.4.1")
            page.select_option("#new", "1.4.2")
            page.fill("#diff-min-traces", "2")
            page.fill("#diff-min-samples", "100")
            page.click("#diff-run")
            page.locator("#diff tbody tr td.fn").first.wait_for(timeout=60000)
            page.frame_locator("#diff-flame").locator("body[data-ready='1']").wait_for(
                state="attached", timeout=60000)
            page.wait_for_timeout(500)
            section = page.locator("#diff").locator("xpath=ancestor::section[1]")
            section.screenshot(path=str(tmp / "dashboard-diff.raw.png"))
            # The merged profile's Time view: the flame frame's page on its own, #view=time.
            merged = page.locator("#flame").get_attribute("src")
            page.set_viewport_size({"width": 1200, "height": 420})
            page.goto(f"{url}{merged}#view=time")
            page.wait_for_selector("body[data-view='time']", timeout=60000)
            # (the frame's page reads its Time view when the tab opens: its lanes, not the
            # "Reading" line before them)
            page.locator("#v-time .flane").first.wait_for(state="attached", timeout=60000)
            page.wait_for_timeout(500)
            page.screenshot(path=str(tmp / "merged-time.raw.png"))
        finally:
            browser.close()
    finally:
        proc.terminate()
        proc.wait(15)
    for name in ("dashboard", "dashboard-diff", "merged-time"):
        save_png(tmp / f"{name}.raw.png", OUT / f"{name}.png")


def main() -> None:
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])  # `flame` or `dashboard`: that part alone
    with tempfile.TemporaryDirectory() as d, sync_playwright() as pw:
        if not only or "flame" in only:
            flame(pw, Path(d))
        if not only or "dashboard" in only:
            dashboard(pw, Path(d))


if __name__ == "__main__":
    main()
