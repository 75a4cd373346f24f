"""A source map without its sources (`sourcesContent`: terser leaves it out by default)
names functions in the fleet as `jsprof report --sourcemap` names them locally: `fleet
sourcemaps upload` puts the original sources it finds beside the map into it.

Real code: an app that walks acorn's AST (acorn from npm, pinned), bundled by esbuild and
minified by terser (both from npm) with the bundle's map as its input map; terser inlines
the walker into the click handler, where V8 calls it an anonymous function. The page
runs in headless Chromium with the real client, a real `jsprof serve` on loopback stores
its upload, the map goes up as docs/field.md says (`fleet sourcemaps upload --url`).
Before the fix the fleet named the walker `(anonymous src.js:4)` at 4:1, where V8 (and
`report --sourcemap`) name it `countIdentifiers` at 4:26."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from mapped_app_util import report_rows, run_mapped_app

pytestmark = [pytest.mark.npm, pytest.mark.chromium]

JS = Path(__file__).parent / "js" / "node_modules"
ESBUILD = JS / ".bin" / "esbuild"
TERSER = JS / ".bin" / "terser"
SRC = """import { parse } from "./acorn.mjs";
import { SOURCE } from "./input.js";

function countIdentifiers(ast) {
  let total = 0;
  for (let r = 0; r < 3; r++) {
    const counts = new Map();
    const stack = [ast];
    while (stack.length) {
      const node = stack.pop();
      if (node.type === "Identifier") counts.set(node.name, (counts.get(node.name) || 0) + 1);
      for (const k in node) {
        const v = node[k];
        if (v && typeof v === "object") {
          if (Array.isArray(v)) {
            for (const c of v) if (c && typeof c.type === "string") stack.push(c);
          } else if (typeof v.type === "string") stack.push(v);
        }
      }
    }
    total = counts.size;
  }
  return total;
}

document.getElementById("parse").addEventListener("click", function onParseClick() {
  const ast = parse(SOURCE, { ecmaVersion: "latest" });
  document.getElementById("out").textContent = String(countIdentifiers(ast));
});
window.appReady = true;
"""
PAGE = """<!doctype html><meta charset="utf-8"><title>sources</title>
<button id="parse">parse</button><p id="out"></p>
<script type="module" src="/static/app.min.js"></script>
<script type="module">
import {startProfiling} from "%(collector)s/v1/client.js";
window.profiler = startProfiling({endpoint: "%(collector)s", app: "shop", key: "k1",
                                  release: "2.0.0", sampleRate: 1});
const wait = () => window.appReady ? (window.ready = true) : setTimeout(wait, 20);
wait();
</script>
"""
LINE = 4  # countIdentifiers' line in SRC
V8_COLUMN = len("function countIdentifiers") + 1  # V8 places a function at its `(`


def _build(d: Path) -> Path:
    """dist/app.min.js and its map (no sourcesContent); the sources stay beside it."""
    assert ESBUILD.exists() and TERSER.exists(), "tests/js missing: `make test` installs it"
    shutil.copy(JS / "acorn" / "dist" / "acorn.mjs", d / "acorn.mjs")
    src = (JS / "acorn" / "dist" / "acorn.js").read_text()
    (d / "input.js").write_text(f"export const SOURCE = {json.dumps(src)};\n")
    (d / "src.js").write_text(SRC)
    dist = d / "dist"
    subprocess.run([str(ESBUILD), "src.js", "--bundle", "--format=esm", "--sourcemap",
                    "--sources-content=false", "--outfile=dist/bundle.js",
                    "--log-level=warning"], cwd=d, check=True, timeout=120)
    # terser keeps its input map's source paths as they are: relative to dist/ here too
    subprocess.run([str(TERSER), "bundle.js", "-c", "-m", "--module", "--source-map",
                    "content='bundle.js.map',url='app.min.js.map'", "-o", "app.min.js"],
                   cwd=dist, check=True, timeout=300)
    doc = orjson.loads((dist / "app.min.js.map").read_bytes())
    # what makes this case: the map names its sources but does not carry them
    assert not any(doc.get("sourcesContent") or ()), "terser carried the sources"
    assert "../src.js" in doc["sources"], doc["sources"]
    return dist


def test_fleet_names_functions_from_the_sources_beside_the_map(tmp_path: Path) -> None:
    dist = _build(tmp_path)
    # The walker loops over built-ins (for-in, Map), where Chromium's own Profiler keeps
    # few stacks: beside two busy loops a page load once kept none of its samples. Such a
    # load says nothing of names, so the page is loaded again (a fresh store each time).
    for attempt in range(3):
        where = tmp_path / f"load{attempt}"
        where.mkdir()
        run = run_mapped_app(where, dist, PAGE, "2.0.0")
        # What `jsprof report --sourcemap` says of the same upload, reading the sources
        # beside the map: the function at the walker's line.
        local = [row for row in report_rows(where, run.raw, dist)
                 if (row.get("resource") or "").endswith("/src.js")]
        if any(r["line"] == LINE for r in local):
            break
    doc = run.top
    assert {(r["name"], r["line"], r["column"]) for r in local
            if r["line"] == LINE} == {("countIdentifiers", LINE, V8_COLUMN)}, local
    mine = [r for r in doc["rows"] if (r["resource"] or "").endswith("/src.js")]
    at_line = {(r["name"], r["line"], r["column"]) for r in mine if r["line"] == LINE}
    assert at_line == {("countIdentifiers", LINE, V8_COLUMN)}, mine
