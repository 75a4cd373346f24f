"""An uploaded source map that does not match its script: the fleet says so, as
`jsprof report --sourcemap` does, in its text output (stderr) and its JSON (`warnings`),
through a real collector on loopback. Real code: acorn (npm, pinned) bundled twice by
esbuild, the second build with a license banner above the code; the first build's map
uploaded for the second build's script maps none of its functions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import orjson
import pytest

from jsprof.cli import main
from jsprof.formats.jsprof import trace_to_doc
from jsprof.record import record
from test_fleet_http import ADMIN, TOKEN, Server

pytestmark = pytest.mark.npm

JS = Path(__file__).parent / "js" / "node_modules"
ESBUILD = JS / ".bin" / "esbuild"
DRIVER = """import {{ parse }} from "./acorn.mjs";
const SOURCE = {source};
let n = 0;
const end = Date.now() + 300;
while (Date.now() < end || n < 2) {{ parse(SOURCE, {{ ecmaVersion: "latest" }}); n++; }}
console.log(n > 0);
"""


def _bundle(d: Path, out: str, *extra: str) -> None:
    subprocess.run([str(ESBUILD), "driver.mjs", "--bundle", "--minify", "--sourcemap",
                    f"--outfile={out}", "--log-level=warning", *extra],
                   cwd=d, check=True, timeout=120)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Two builds of one app (the second with a banner), the second one's recording."""
    assert ESBUILD.exists(), "tests/js missing: `make test` installs it"
    d = tmp_path_factory.mktemp("mismatch")
    shutil.copy(JS / "acorn" / "dist" / "acorn.mjs", d / "acorn.mjs")
    src = (JS / "acorn" / "dist" / "bin.js").read_text()  # a whole small script
    (d / "driver.mjs").write_text(DRIVER.format(source=json.dumps(src)))
    (d / "old").mkdir()
    (d / "new").mkdir()
    _bundle(d, "old/app.min.js")
    _bundle(d, "new/app.min.js", "--banner:js=/*! shop 2.0\n * acorn 8.19.0 (MIT)\n */")
    rec = record(d / "new" / "app.min.js", sample_interval=1.0, clock="cpu")
    return d, rec


def _upload_trace(srv: Server, rec, release: str, uid: str) -> None:
    body = orjson.dumps({"trace": trace_to_doc(rec.tracks[0].trace),
                         "meta": {"sampleInterval": 1.0}})
    q = urlencode({"app": "shop", "release": release, "route": "/", "env": "prod", "id": uid,
                   "key": "k1"})
    status, _, data = srv.request("POST", f"/v1/traces?{q}", body,
                                  {"Content-Type": "application/json"})
    assert status == 202, data


def _upload_map(srv: Server, path: Path, release: str) -> None:
    q = urlencode({"app": "shop", "release": release, "name": "app.min.js.map"})
    status, _, body = srv.request("POST", f"/v1/sourcemaps?{q}", path.read_bytes(),
                                  {"Authorization": f"Bearer {ADMIN}"})
    assert status == 201, body


def test_fleet_says_an_uploaded_map_does_not_match_its_script(builds, tmp_path, capsys):
    d, rec = builds
    # What `jsprof report --sourcemap` says of the old build's map on the new build.
    trace_file = tmp_path / "new.jsprof.json"
    import jsprof

    jsprof.save(rec, trace_file)
    jsprof_bin = str(Path(sys.executable).parent / "jsprof")
    rep = subprocess.run([jsprof_bin, "report", str(trace_file), "--sourcemap",
                          str(d / "old" / "app.min.js.map")],
                         capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    said = [ln for ln in rep.stderr.splitlines() if "does not match" in ln]
    assert len(said) == 1, rep.stderr
    why = said[0].split("does not match it", 1)[1].split(";", 1)[0]
    assert why.startswith(" (") and why.endswith(")"), said

    srv = Server(tmp_path / "store")
    try:
        # 2.0 got the old build's map (wrong); 2.1, the same script, its own (right).
        _upload_trace(srv, rec, "2.0", "a")
        _upload_trace(srv, rec, "2.1", "b")
        _upload_map(srv, d / "old" / "app.min.js.map", "2.0")
        _upload_map(srv, d / "new" / "app.min.js.map", "2.1")
        env = {**os.environ, "JSPROF_READ_TOKEN": TOKEN}

        def fleet(*argv: str) -> subprocess.CompletedProcess:
            return subprocess.run([jsprof_bin, "fleet", *argv, "--url", srv.url, "--app",
                                   "shop"], capture_output=True, text=True, timeout=300,
                                  env=env)

        p = fleet("top", "--release", "2.0", "--json")
        assert p.returncode == 0, p.stderr
        remote = orjson.loads(p.stdout)
        warnings = remote["warnings"]
        assert len(warnings) == 1, warnings
        line = warnings[0]
        url = said[0].split(": its source map", 1)[0].removeprefix("jsprof: ")
        # the same words as report's: the script, why; what to do is the fleet's own
        assert line.startswith(f"{url}: its source map does not match it{why};"), (line, said)
        assert "jsprof fleet sourcemaps upload" in line and "shop 2.0" in line
        p = fleet("top", "--release", "2.0")
        assert p.returncode == 0
        assert f"jsprof: warning: {line}" in p.stderr.splitlines(), p.stderr
        # its own map: no warning, and the functions get acorn's names
        p = fleet("top", "--release", "2.1", "--json")
        doc = orjson.loads(p.stdout)
        assert doc["warnings"] == [], doc["warnings"]
        assert any(r["name"].startswith("pp$") for r in doc["rows"]), doc["rows"][:5]
        # the same query on the store, without the collector: the same document
        capsys.readouterr()
        assert main(["fleet", "top", "--store", str(tmp_path / "store"), "--app", "shop",
                     "--release", "2.0", "--json"]) == 0
        assert orjson.loads(capsys.readouterr().out) == remote
        # a diff and the regressions of the two releases carry it too
        p = fleet("diff", "--base", "release=2.0", "--new", "release=2.1", "--json",
                  "--min-traces", "1", "--min-samples", "1")
        assert p.returncode == 0, p.stderr
        assert line in orjson.loads(p.stdout)["warnings"]
        p = fleet("diff", "--base", "release=2.0", "--new", "release=2.1",
                  "--min-traces", "1", "--min-samples", "1")
        assert f"jsprof: warning: {line}" in p.stderr.splitlines(), p.stderr
        p = fleet("regressions", "--json", "--min-traces", "1", "--min-samples", "1")
        assert p.returncode in (0, 1), p.stderr
        assert line in orjson.loads(p.stdout)["warnings"]
    finally:
        srv.stop()
