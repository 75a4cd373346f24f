"""Make the pictures in docs/images/ from real recordings (`make docs-images`).

- flame.png: `jsprof flame` of examples/app.js recorded on QuickJS, in headless Chromium.
- dashboard.png: a real `jsprof serve` on loopback that took uploads of real recordings
  (examples/app.js on QuickJS: release 1.4.1 as it is, 1.4.2 tokenizing twice the source,
  each as `<release>/app.js` so the diff matches them), its dashboard signed in: the top
  table of release 1.4.2, its merged flame graph and `tokenize`'s share per release.

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
        page.locator("rect").first.wait_for(timeout=60000)
        page.screenshot(path=str(tmp / "flame.raw.png"))
    finally:
        browser.close()
    save_png(tmp / "flame.raw.png", OUT / "flame.png")


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
            page.frame_locator("#flame").locator("rect").first.wait_for(timeout=60000)
            page.locator("#top td.fn", has_text="tokenize").first.click()
            page.locator("#chart rect").first.wait_for(timeout=60000)
            page.wait_for_timeout(500)  # let the last frame paint
            box = page.locator("#chart").bounding_box()  # down to the per-release chart
            page.screenshot(path=str(tmp / "dashboard.raw.png"), full_page=True,
                            clip={"x": 0, "y": 0, "width": 1280,
                                  "height": box["y"] + box["height"] + 12})
        finally:
            browser.close()
    finally:
        proc.terminate()
        proc.wait(15)
    save_png(tmp / "dashboard.raw.png", OUT / "dashboard.png")


def main() -> None:
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d, sync_playwright() as pw:
        flame(pw, Path(d))
        dashboard(pw, Path(d))


if __name__ == "__main__":
    main()
